"""Training with tf.compat.v1 in `ringcc.tensorflow`: DistributedOptimizer
(TensorFlow's tf.compat.v1 optimizers; Keras optimizers go to
ringcc.keras) and BroadcastGlobalVariablesHook."""

from __future__ import annotations

import tensorflow as tf

from ringcc.tensorflow import _ops
from ringcc.tensorflow.compression import Compression
from ringcc.tensorflow.functions import broadcast_global_variables
from ringcc.tensorflow.gradients import allreduce_gradients


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
        from ringcc.keras.optimizer import DistributedOptimizer as KerasDistributedOptimizer

        return KerasDistributedOptimizer(
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
        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
