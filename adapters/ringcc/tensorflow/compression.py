"""Gradient compression of `ringcc.tensorflow` (`hvd.Compression`), as
Horovod's: `compress(tensor) -> (compressed, ctx)`, `decompress(tensor, ctx)`.
`Compression.fp16` sends floating-point tensors as float16 (the core sums
16-bit floats in float32); other dtypes pass unchanged."""

from __future__ import annotations

import tensorflow as tf


class Compressor:
    """Interface: compress a tensor before the collective, decompress after."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx is not None else tensor


class Compression:
    """The compressors that `allreduce`, `DistributedGradientTape` and
    `DistributedOptimizer` take."""

    none = NoneCompressor
    fp16 = FP16Compressor
