"""DistributedOptimizer of `ringcc.keras`: the optimizer you pass, made of
a subclass of its class whose apply() first reduces the gradients over the
ranks with the collectives of the backend Keras runs on: ringcc.tensorflow's
ops (TensorFlow; inside the traced train step), ringcc.jax's (JAX; inside
the jitted step) or ringcc.torch's Horovod API (PyTorch). And load_model,
which makes a loaded model's optimizer distributed again."""

from __future__ import annotations

import keras

import ringcc
from ringcc.keras.basics import Average, backend


def _reduce_gradients(grads, options):
    backend_name = backend()
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present or ringcc.size() == 1 and options["op"] == Average:
        return grads
    values = [grads[i] for i in present]
    if backend_name == "tensorflow":
        from ringcc.tensorflow.gradients import allreduce_gradients

        reduced = allreduce_gradients(
            values,
            None,
            compression=options["compression"],
            sparse_as_dense=options["sparse_as_dense"],
            op=options["op"],
            gradient_predivide_factor=options["gradient_predivide_factor"],
            num_groups=options["num_groups"],
            groups=options["groups"],
            process_set=options["process_set"],
            name="DistributedOptimizer",
        )
    elif backend_name == "jax":
        import ringcc.jax as rj

        op = "average" if options["op"] == Average else "sum"
        reduced = [rj.allreduce(g, op) for g in values]
    elif backend_name == "torch":
        import ringcc.torch as hvd_torch

        compression = hvd_torch.Compression.fp16 if options["compression"].__name__ == "FP16Compressor" else None
        reduced = hvd_torch.grouped_allreduce(
            values,
            op=options["op"],
            name="keras.DistributedOptimizer",
            **({"compression": compression} if compression else {}),
        )
    else:
        raise NotImplementedError(f"ringcc.keras: the {backend_name} backend has no collectives in ringcc")
    out = list(grads)
    for i, r in zip(present, reduced):
        out[i] = r
    return out


class _DistributedOptimizerMixin:
    """Put before a Keras optimizer's class: its apply() averages the
    gradients over the ranks first."""

    def apply(self, grads, trainable_variables=None):
        grads = _reduce_gradients(list(grads), self._ringcc_options)
        return super().apply(grads, trainable_variables)


_classes: dict = {}


def _distributed_class(cls):
    if issubclass(cls, _DistributedOptimizerMixin):
        return cls
    found = _classes.get(cls)
    if found is None:
        # Named and placed as the class it wraps, so that a saved model
        # records the plain optimizer (load_model() wraps it again).
        found = type(cls.__name__, (_DistributedOptimizerMixin, cls), {"__module__": cls.__module__})
        _classes[cls] = found
    return found


def DistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=None,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
):
    """Returns `optimizer` itself, now of a subclass of its class whose
    apply() (what model.fit's train step calls, on every backend) reduces
    the gradients over the ranks first. backward_passes_per_step > 1 uses
    Keras' own gradient_accumulation_steps (the gradients are reduced every
    pass)."""
    if compression is None:
        compression = _compression_none()
    if backward_passes_per_step > 1:
        optimizer.gradient_accumulation_steps = int(backward_passes_per_step)
    optimizer.__class__ = _distributed_class(optimizer.__class__)
    optimizer._ringcc_options = dict(
        compression=compression,
        sparse_as_dense=sparse_as_dense,
        op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups,
        groups=groups,
        process_set=process_set,
    )
    return optimizer


def _compression_none():
    class NoneCompressor:
        @staticmethod
        def compress(tensor):
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor

    if backend() == "tensorflow":
        from ringcc.tensorflow.compression import Compression

        return Compression.none
    return NoneCompressor


def load_model(filepath, custom_optimizers=None, custom_objects=None, compression=None, compile=True, **kwargs):
    """keras.models.load_model, with the model's optimizer made a
    DistributedOptimizer again."""
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        objects[cls.__name__] = cls
    model = keras.models.load_model(filepath, custom_objects=objects or None, compile=compile, **kwargs)
    if getattr(model, "optimizer", None) is not None:
        DistributedOptimizer(model.optimizer, compression=compression)
    return model
