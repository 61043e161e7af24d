"""The reduction of gradients over the ranks that the tapes and optimizers
of `ringcc.tensorflow` (and ringcc.keras on TensorFlow) share:
allreduce_gradients.

The gradients are reduced by one grouped allreduce op per group (all dense
gradients form one group unless `num_groups` or `groups` say otherwise):
the op hands every gradient of its group to ringcc's engine as a named
collective and starts the engine's cycle, which fuses them into as few
allreduces as the fusion threshold allows. Sparse gradients
(tf.IndexedSlices) are allgathered unless `sparse_as_dense`.
"""

from __future__ import annotations

import tensorflow as tf

import ringcc
from ringcc.tensorflow import _ops
from ringcc.tensorflow.collectives import allreduce, grouped_allreduce
from ringcc.tensorflow.compression import Compression
from ringcc.tensorflow.process_sets import global_process_set


def _split_groups(items, num_groups, groups, variables):
    """Indices of `items` per group."""
    indices = [i for i, g in enumerate(items) if g is not None]
    if groups is not None:
        if isinstance(groups, int):
            num_groups = groups
        else:
            by_ref = {}
            for k, group in enumerate(groups):
                for v in group:
                    by_ref[id(v)] = k
            explicit = [[] for _ in groups]
            rest = []
            for i in indices:
                k = by_ref.get(id(variables[i])) if variables is not None else None
                (explicit[k] if k is not None else rest).append(i)
            return [g for g in explicit if g] + [[i] for i in rest]
    if num_groups and num_groups > 0:
        n = min(num_groups, len(indices)) or 1
        size, extra = divmod(len(indices), n)
        out, start = [], 0
        for k in range(n):
            end = start + size + (1 if k < extra else 0)
            out.append(indices[start:end])
            start = end
        return [g for g in out if g]
    return [indices] if indices else []


def allreduce_gradients(
    grads,
    variables=None,
    compression=Compression.none,
    sparse_as_dense=False,
    op=_ops.Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    name="DistributedGradientTape",
):
    """`grads` (a list, None entries kept) reduced over the ranks."""
    process_set = global_process_set if process_set is None else process_set
    op = _ops._op_value(op)
    prescale, postscale = 1.0, 1.0
    if gradient_predivide_factor != 1.0:
        if op != _ops.Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        n = ringcc.size() if process_set is global_process_set else process_set.size()
        op, prescale, postscale = _ops.Sum, 1.0 / gradient_predivide_factor, gradient_predivide_factor / n
    grads = list(grads)
    if sparse_as_dense:
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    eager = tf.executing_eagerly()
    out = list(grads)
    dense = [g if not isinstance(g, tf.IndexedSlices) else None for g in grads]
    for k, group in enumerate(_split_groups(dense, num_groups, groups, variables)):
        reduced = grouped_allreduce(
            [grads[i] for i in group],
            compression=compression,
            op=op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            # Eagerly the same names every step; in a graph, the nodes' own.
            name=f"{name}.g{k}" if eager else None,
            process_set=process_set,
        )
        for i, r in zip(group, reduced):
            out[i] = r
    for i, g in enumerate(grads):
        if isinstance(g, tf.IndexedSlices):
            out[i] = allreduce(
                g,
                op=op,
                prescale_factor=prescale,
                postscale_factor=postscale,
                name=f"{name}.sparse{i}" if eager else None,
                process_set=process_set,
            )
    return out
