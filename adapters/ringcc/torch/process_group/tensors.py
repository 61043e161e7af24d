"""Tensors as the core wants them, for backend "ring" (ringcc/torch/staging.py):
a call's tensors as 1-D core units (their bytes when the core does not move
their dtype), and the one device of a call's tensors."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from ringcc.torch import staging
from ringcc.torch.dtypes import CORE_DTYPES

DEVICES = ("cpu", "cuda")

plain = staging.plain


def as_units(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of contiguous `t` in a dtype the core moves: t itself, or
    its bytes."""
    return staging.in_units(t.reshape(-1))


def unit_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype in CORE_DTYPES else torch.uint8


def unit_count(t: torch.Tensor) -> int:
    return t.numel() if t.dtype in CORE_DTYPES else t.numel() * t.element_size()


def input_units(t: torch.Tensor) -> torch.Tensor:
    """An input as 1-D core units, copied only when not contiguous."""
    t = plain(t)
    if not t.is_contiguous():
        t = t.contiguous()
    return as_units(t)


def output_units(t: torch.Tensor) -> torch.Tensor | None:
    """An output as 1-D core units sharing its memory, or None when it must
    be staged (not contiguous)."""
    t = plain(t)
    return as_units(t) if t.is_contiguous() else None


def store_units(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copies 1-D core units `src` into tensor `dst` (any layout)."""
    dst.copy_(staging.from_units(src, dst.dtype).view(dst.shape))


def store_pieces(units: torch.Tensor, outputs: Sequence[torch.Tensor]) -> None:
    """Copies 1-D core units `units` into `outputs`, one piece of each
    output's size after another."""
    offset = 0
    for o in outputs:
        n = unit_count(o)
        store_units(units[offset : offset + n], o)
        offset += n


def rows_view(t: torch.Tensor) -> torch.Tensor:
    """Contiguous `t` as (rows, elements per row) in core units, for the
    collectives that split along dim 0 (all_to_all_single)."""
    return staging.in_units(t.reshape(staging.rows(t)))


CPU = torch.device("cpu")


def device_of(tensors: Sequence[torch.Tensor], what: str, sparse_ok: bool = False) -> torch.device:
    """The one device of a call's tensors: the CPU or one CUDA device."""
    device = None
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: expected tensors, got {type(t).__name__}")
        if t.layout != torch.strided and not (sparse_ok and t.layout == torch.sparse_coo):
            raise ValueError(f"{what}: backend 'ring' does not support {t.layout} tensors here")
        d = t.device
        if device is None:
            device = d
        elif d != device:
            raise ValueError(f"{what}: the tensors of one call must be on one device, got {device} and {d}")
    if device is not None and device.type not in DEVICES:
        raise ValueError(f"{what}: backend 'ring' takes CPU and CUDA tensors, got one on {device}")
    return device if device is not None else CPU


def on_stream(stream):
    """Makes `stream` torch's current stream for the block (None: nothing)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def one_tensor(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise ValueError(
            f"{what}: backend 'ring' takes exactly one tensor per call (one device per process), got {len(tensors)}"
        )
    return tensors[0]
