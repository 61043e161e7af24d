"""Tensors as the Horovod API's collectives hand them to the core ("wires"):
zero-copy when they are contiguous and of a dtype the core handles, else
a contiguous copy on the tensor's device (int16 reduced in int32, complex
as real pairs, other dtypes moved as bytes); and which calls take the
direct paths (the core's raw entry points)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ringcc.torch import staging
from ringcc.torch.dtypes import CORE_DTYPE_CODES, CORE_DTYPES
from ringcc.torch.horovod.basics import Average, Max, Min, Product, Sum

# dtypes whose late-allocated outputs (NumPy arrays) torch can wrap
_NUMPY_DTYPES = CORE_DTYPES - {torch.bfloat16}
# The direct paths: the core's dtype code of each core dtype, the ops they
# take as they are.
_DIRECT_DTYPE_CODES = CORE_DTYPE_CODES
_DIRECT_OPS = frozenset((Sum, Average, Min, Max, Product))
_STRIDED = torch.strided


def direct_code(tensor, op=Sum):
    """Which door a call takes: the core's dtype code of `tensor` when the
    direct paths (the core's raw entry points) take it as it is, a dense
    contiguous CPU torch.Tensor of a core dtype, reduced (for a reduction)
    by an int op the core takes as it is; None when the call takes the
    general path."""
    if (
        type(op) is int
        and op in _DIRECT_OPS
        and isinstance(tensor, torch.Tensor)
        and tensor.is_cpu
        and tensor.layout == _STRIDED
        and tensor.is_contiguous()
    ):
        return _DIRECT_DTYPE_CODES.get(tensor.dtype)
    return None


def check_tensor(tensor, what: str) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise ValueError(
            f"{what}: {tensor.layout} tensors are not supported here "
            "(use sparse_allreduce_async for sparse COO tensors)"
        )
    return tensor.detach()


def as_torch(x) -> torch.Tensor:
    """A result the core allocated: a NumPy array (host) or already a torch
    tensor (CUDA, allocated by torch on the input's device)."""
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(x)


def plain_contiguous(t: torch.Tensor) -> torch.Tensor:
    """`t` (detached) contiguous on its own device (the CPU or CUDA): t
    itself when it already is. Other devices go through the CPU."""
    if t.device.type not in ("cpu", "cuda"):
        t = t.cpu()
    return t.contiguous()


def check_reducible(t: torch.Tensor, op: int, what: str) -> None:
    """Raises when reduce_wire cannot carry `t` for `op`."""
    dtype = t.dtype
    if dtype in CORE_DTYPES or dtype == torch.int16:
        return
    if dtype.is_complex:
        if op not in (Sum, Average):
            raise TypeError(f"{what}: complex tensors support Sum and Average only")
        return
    raise TypeError(
        f"{what}: dtype {dtype} is not supported for reductions (supported: "
        "float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, "
        "complex64/128 with Sum or Average)"
    )


def reduce_wire(t: torch.Tensor, op: int, what: str) -> torch.Tensor:
    """A CPU contiguous tensor of a core dtype carrying `t` for a reduction
    (t's own memory when possible)."""
    check_reducible(t, op, what)
    dtype = t.dtype
    if dtype in CORE_DTYPES:
        return plain_contiguous(t)
    if dtype == torch.int16:
        return plain_contiguous(t).to(torch.int32)
    return torch.view_as_real(plain_contiguous(t))


def from_reduce_wire(w: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.dtype.is_complex:
        w = torch.view_as_complex(w)
    elif w.dtype != like.dtype:
        w = w.to(like.dtype)
    w = w.view(like.shape)
    if like.device.type != "cpu":
        w = w.to(like.device)
    return w


def move_wire(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor that carries `t` for broadcast, allgather or
    alltoall: t itself (as rows) for the core's dtypes whose late-allocated
    outputs torch can take (on the CPU NumPy's, so not bfloat16; on CUDA all
    of them), else its bytes as (rows, bytes per row) uint8, sharing t's
    memory when possible."""
    t = plain_contiguous(t)
    moved = CORE_DTYPES if t.is_cuda else _NUMPY_DTYPES
    if t.dtype in moved:
        return t if t.dim() else t.reshape(1)
    return staging.in_units(t.reshape(staging.rows(t)), moved)


def from_move_wire(w: torch.Tensor, like: torch.Tensor, first_dim: int | None = None) -> torch.Tensor:
    """The inverse of move_wire for an output of `first_dim` rows (default: like's)."""
    tail = tuple(like.shape[1:]) if like.dim() else ()
    w = staging.from_units(w, like.dtype)
    if first_dim is None:
        shape = tuple(like.shape)
    else:
        shape = (first_dim,) + tail
    w = w.reshape(shape)
    if like.device.type != "cpu":
        w = w.to(like.device)
    return w


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.data_ptr() == b.data_ptr() and a.is_contiguous() and b.is_contiguous()


def unwired_result(tensor, wire, out, inplace: bool, direct: bool, unwire: Callable) -> Callable:
    """The finish of the Handle of a call whose result the core wrote on
    `wire` (in place) or `out`, unwire(w) making it a tensor like the input:
    in place, `tensor` itself (copied back from the wire unless the call ran
    on its memory, `direct`); else a new tensor."""
    if not inplace:
        return lambda _: unwire(out)

    def finish(_):
        if not direct:
            with torch.no_grad():
                tensor.copy_(unwire(wire))
        return tensor

    return finish
