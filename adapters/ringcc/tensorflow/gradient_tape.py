"""Training with `ringcc.tensorflow`: DistributedGradientTape,
PartialDistributedGradientTape, DistributedOptimizer (TensorFlow's
tf.compat.v1 optimizers; Keras optimizers go to ringcc.keras) and
BroadcastGlobalVariablesHook.

A tape's gradients are reduced by one grouped allreduce op per group (all
dense gradients form one group unless `num_groups` or `groups` say
otherwise): the op hands every gradient of its group to ringcc's engine as
a named collective and starts the engine's cycle, which fuses them into as
few allreduces as the fusion threshold allows. Sparse gradients
(tf.IndexedSlices) are allgathered unless `sparse_as_dense`.
"""

from __future__ import annotations

import tensorflow as tf

import ringcc
from ringcc.tensorflow import _ops
from ringcc.tensorflow.compression import Compression


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
    from ringcc.tensorflow import allreduce, global_process_set, grouped_allreduce

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


class _DistributedGradientTape(tf.GradientTape):
    def __init__(
        self,
        tape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
        local_variables,
        scale_local_gradients,
        persistent=False,
        watch_accessed_variables=True,
    ):
        super().__init__(persistent=persistent, watch_accessed_variables=watch_accessed_variables)
        self._tape = tape
        self._ringcc = dict(
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            num_groups=num_groups,
            groups=groups,
            process_set=process_set,
        )
        self._local_ids = {id(v) for v in (local_variables or [])}
        self._scale_local = scale_local_gradients

    def register_local_source_variables(self, variables):
        self._local_ids |= {id(v) for v in variables}

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat = tf.nest.flatten(grads, expand_composites=False)
        shared = [g if id(s) not in self._local_ids else None for g, s in zip(flat, flat_sources)]
        reduced = allreduce_gradients(shared, flat_sources, **self._ringcc)
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
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    return cls(
        gradtape._tape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
        None,
        scale_local_gradients,
        persistent=gradtape._persistent,
        watch_accessed_variables=gradtape._watch_accessed_variables,
    )


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
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    return cls(
        gradtape._tape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
        local_variables,
        scale_local_gradients,
        persistent=gradtape._persistent,
        watch_accessed_variables=gradtape._watch_accessed_variables,
    )


# --------------------------------------------------------------------------
# DistributedOptimizer for tf.compat.v1 optimizers


class _DistributedV1Optimizer:
    """Mixed in before a tf.compat.v1.train.Optimizer's class."""

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = super().compute_gradients(*args, **kwargs)
        if self._ringcc_bpps > 1:
            return grads_and_vars  # reduced once per backward_passes_per_step, in apply_gradients
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        return list(zip(allreduce_gradients(grads, variables, **self._ringcc_options), variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._ringcc_bpps == 1:
            return super().apply_gradients(grads_and_vars, global_step, name)
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        variables = [v for _, v in grads_and_vars]
        if self._ringcc_accumulators is None:
            with tf.init_scope():
                self._ringcc_accumulators = [
                    tf.Variable(tf.zeros_like(v), trainable=False, name="ringcc_accumulator") for v in variables
                ]
                self._ringcc_passes = tf.Variable(0, dtype=tf.int64, trainable=False, name="ringcc_passes")
        accumulate = [
            a.assign_add(tf.convert_to_tensor(g)) for a, (g, _) in zip(self._ringcc_accumulators, grads_and_vars)
        ]
        with tf.control_dependencies(accumulate):
            passes = self._ringcc_passes.assign_add(1)

        def apply():
            values = [a.read_value() for a in self._ringcc_accumulators]
            if self._ringcc_average_aggregated:
                values = [v / tf.cast(self._ringcc_bpps, v.dtype) for v in values]
            reduced = allreduce_gradients(values, variables, **self._ringcc_options)
            update = super(_DistributedV1Optimizer, self).apply_gradients(
                list(zip(reduced, variables)), global_step, name
            )
            with tf.control_dependencies([update] if update is not None else []):
                resets = [a.assign(tf.zeros_like(a)) for a in self._ringcc_accumulators]
            with tf.control_dependencies(resets):
                return tf.constant(True)

        return tf.cond(tf.equal(passes % self._ringcc_bpps, 0), apply, lambda: tf.constant(False))


def DistributedOptimizer(
    optimizer,
    name=None,
    use_locking=False,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    backward_passes_per_step=1,
    op=_ops.Average,
    gradient_predivide_factor=1.0,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """Wraps a tf.compat.v1.train.Optimizer (its compute_gradients returns
    the reduced gradients; with backward_passes_per_step > 1 gradients are
    accumulated locally and reduced every that many apply_gradients calls)
    or a Keras optimizer (ringcc.keras.DistributedOptimizer)."""
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be >= 1")
    if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
        import importlib

        _keras = importlib.import_module("ringcc.tensorflow.keras")

        return _keras.DistributedOptimizer(
            optimizer,
            name=name,
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            backward_passes_per_step=backward_passes_per_step,
            op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            average_aggregated_gradients=average_aggregated_gradients,
            num_groups=num_groups,
            groups=groups,
            process_set=process_set,
        )
    cls = type(optimizer.__class__.__name__, (_DistributedV1Optimizer, optimizer.__class__), {})
    optimizer.__class__ = cls
    optimizer._ringcc_options = dict(
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups,
        groups=groups,
        process_set=process_set,
        name="DistributedOptimizer",
    )
    optimizer._ringcc_bpps = int(backward_passes_per_step)
    optimizer._ringcc_average_aggregated = bool(average_aggregated_gradients)
    optimizer._ringcc_accumulators = None
    return optimizer


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook (tf.compat.v1's MonitoredTrainingSession) that
    broadcasts the global variables from root_rank once the session exists."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None

    def begin(self):
        from ringcc.tensorflow import broadcast_global_variables

        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
