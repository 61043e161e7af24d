"""Gradient compression for ringcc.mxnet (`Compression`, as horovod.mxnet's).

A compressor turns an NDArray into what goes over the wire and back:
`compress(tensor) -> (compressed, ctx)` and `decompress(compressed, ctx)`.
`Compression.fp16` sends floating-point arrays as float16 (the core sums
16-bit floats in float32 and rounds once per step of the ring); other
dtypes pass through unchanged. `DistributedTrainer(compression=...)` takes
one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Compression", "Compressor", "NoneCompressor", "FP16Compressor"]


class Compressor:
    """Interface: compress an NDArray before the collective, decompress after."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed NDArray, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the NDArray in its original form."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: the array goes as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


def _floating(dtype) -> bool:
    return dtype is not None and np.dtype(dtype).kind == "f"


class FP16Compressor(Compressor):
    """Floating-point arrays travel as float16 (a float16 array as it is)."""

    @staticmethod
    def compress(tensor):
        dtype = np.dtype(tensor.dtype)
        if _floating(dtype) and dtype != np.float16:
            return tensor.astype("float16"), dtype
        return tensor, dtype

    @staticmethod
    def decompress(tensor, ctx):
        if _floating(ctx) and np.dtype(tensor.dtype) != ctx:
            return tensor.astype(ctx)
        return tensor


class Compression:
    """The compressors `DistributedTrainer(compression=...)` takes."""

    none = NoneCompressor
    fp16 = FP16Compressor
