"""Gradient compression for `ringcc.torch`'s Horovod API (`hvd.Compression`).

A compressor turns a tensor into what goes over the wire and back:
`compress(tensor) -> (compressed, ctx)` and `decompress(compressed, ctx)`.
`Compression.fp16` sends floating-point tensors as float16 (the core sums
16-bit floats in float32, then rounds once per step of the ring), and
`Compression.bf16` as bfloat16 (not in Horovod's torch API; same idea, the
wider exponent of float32). Other dtypes pass through unchanged.
"""

from __future__ import annotations

import torch


class Compressor:
    """Interface: compress a tensor before the collective, decompress after."""

    @staticmethod
    def compress(tensor):
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """Returns the tensor in its original form."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: the tensor goes as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompressor(Compressor):
    wire_dtype: torch.dtype = torch.float16

    @classmethod
    def compress(cls, tensor):
        dtype = tensor.dtype
        if dtype.is_floating_point and dtype != cls.wire_dtype:
            return tensor.to(cls.wire_dtype), dtype
        return tensor, dtype

    @classmethod
    def decompress(cls, tensor, ctx):
        if ctx is not None and ctx.is_floating_point and tensor.dtype != ctx:
            return tensor.to(ctx)
        return tensor


class FP16Compressor(_CastCompressor):
    """Floating-point tensors travel as float16."""

    wire_dtype = torch.float16


class BF16Compressor(_CastCompressor):
    """Floating-point tensors travel as bfloat16 (ringcc addition)."""

    wire_dtype = torch.bfloat16


class Compression:
    """The compressors `DistributedOptimizer(compression=...)` and
    `allreduce(compression=...)` take."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
