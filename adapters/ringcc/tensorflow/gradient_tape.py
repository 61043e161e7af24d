"""DistributedGradientTape and PartialDistributedGradientTape of
`ringcc.tensorflow`: tapes whose gradient() returns the gradients reduced
over the ranks (gradients.py)."""

from __future__ import annotations

import tensorflow as tf

import ringcc
from ringcc.tensorflow import _ops
from ringcc.tensorflow.compression import Compression
from ringcc.tensorflow.gradients import allreduce_gradients


class _DistributedGradientTape(tf.GradientTape):
    def __init__(
        self,
        tape,
        reduction: tuple,
        local_variables,
        scale_local_gradients,
        persistent=False,
        watch_accessed_variables=True,
    ):
        super().__init__(persistent=persistent, watch_accessed_variables=watch_accessed_variables)
        self._tape = tape
        self._ringcc = reduction  # allreduce_gradients' arguments after the variables
        self._local_ids = {id(v) for v in (local_variables or [])}
        self._scale_local = scale_local_gradients

    def register_local_source_variables(self, variables):
        self._local_ids |= {id(v) for v in variables}

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat = tf.nest.flatten(grads, expand_composites=False)
        shared = [g if id(s) not in self._local_ids else None for g, s in zip(flat, flat_sources)]
        reduced = allreduce_gradients(shared, flat_sources, *self._ringcc)
        out = []
        n = ringcc.size()
        for g, r, s in zip(flat, reduced, flat_sources):
            if id(s) in self._local_ids:
                if g is not None and self._scale_local and n > 1:
                    g = (
                        g / tf.cast(n, g.dtype)
                        if not isinstance(g, tf.IndexedSlices)
                        else tf.IndexedSlices(g.values / tf.cast(n, g.values.dtype), g.indices, g.dense_shape)
                    )
                out.append(g)
            else:
                out.append(r)
        return tf.nest.pack_sequence_as(grads, out)


def _distributed(gradtape, local_variables, scale_local_gradients, reduction: tuple):
    """`gradtape` (after its `with` block) as a distributed tape: of a class
    of its own that is also gradtape's class. `reduction`: the arguments of
    allreduce_gradients after the variables (compression, sparse_as_dense,
    op, gradient_predivide_factor, num_groups, groups, process_set)."""
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    return cls(
        gradtape._tape,
        reduction,
        local_variables,
        scale_local_gradients,
        persistent=gradtape._persistent,
        watch_accessed_variables=gradtape._watch_accessed_variables,
    )


def DistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=_ops.Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """A tape whose gradient() returns the gradients reduced over the ranks
    (op Average by default). Wrap the tape after its `with` block."""
    reduction = (compression, sparse_as_dense, op, gradient_predivide_factor, num_groups, groups, process_set)
    return _distributed(gradtape, None, scale_local_gradients, reduction)


def PartialDistributedGradientTape(
    gradtape,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    op=_ops.Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    process_set=None,
    local_layers=None,
    scale_local_gradients=True,
):
    """DistributedGradientTape whose `local_layers`' variables keep their
    local gradients (divided by the number of ranks unless
    scale_local_gradients=False)."""
    local_layers = local_layers or []
    if not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    local_variables = [v for layer in local_layers for v in layer.trainable_weights]
    reduction = (compression, sparse_as_dense, op, gradient_predivide_factor, num_groups, groups, process_set)
    return _distributed(gradtape, local_variables, scale_local_gradients, reduction)
