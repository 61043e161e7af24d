"""Tensors as the core takes them, for the torch.distributed backend
(process_group/) and the Horovod API (horovod/): the core moves and reduces
its own dtypes (dtypes.py); a tensor of another dtype moves as its bytes,
and its result is viewed back as that dtype.

A bottom module: it imports torch and ringcc.torch.dtypes, nothing else of
ringcc.torch."""

from __future__ import annotations

import math

import torch

from ringcc.torch.dtypes import CORE_DTYPES


def plain(t: torch.Tensor) -> torch.Tensor:
    """`t` without autograd (DLPack refuses tensors that require grad)."""
    return t.detach() if t.requires_grad else t


def rows(t: torch.Tensor) -> tuple[int, int]:
    """(rows, elements per row) of `t` along dim 0; a scalar is one row of one."""
    if t.dim() == 0:
        return 1, 1
    return int(t.shape[0]), math.prod(int(d) for d in t.shape[1:])


def in_units(t: torch.Tensor, moved: frozenset = CORE_DTYPES) -> torch.Tensor:
    """Contiguous `t` (of one dimension or more) in a dtype the core moves:
    t itself when its dtype is in `moved`, else a view of its bytes (its
    last dimension counted in bytes)."""
    return t if t.dtype in moved else t.view(torch.uint8)


def from_units(units: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The inverse of in_units: `units` viewed as `dtype` (its bytes when
    they are not of it already)."""
    return units if units.dtype == dtype else units.view(dtype)
