"""torch's reductions (dist.ReduceOp) for backend "ring": those the core
runs, as the core's ops, and the others, done locally on what every rank
sent."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ringcc.torch.dtypes import CORE_DTYPES

RedOpType = dist.ReduceOp.RedOpType
# torch's reduction -> the core's (Sum 0, Average 1, Min 2, Max 3, Product 4).
CORE_OPS = {
    RedOpType.SUM: 0,
    RedOpType.AVG: 1,
    RedOpType.MIN: 2,
    RedOpType.MAX: 3,
    RedOpType.PRODUCT: 4,
    RedOpType.PREMUL_SUM: 0,  # with the factor as prescale
}
# The reductions of the short path in allreduce() (no prescale factor).
# Keyed by the enum's int value (hashing the pybind11 enum costs a microsecond).
FAST_OPS = {int(kind): op for kind, op in CORE_OPS.items() if kind != RedOpType.PREMUL_SUM}


def reduction(opts) -> tuple[object, float]:
    """(RedOpType, prescale factor) of the options' reduceOp."""
    op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
    kind = op.op if hasattr(op, "op") else op
    if kind == RedOpType.PREMUL_SUM:
        if not hasattr(op, "factor"):  # some torch releases keep it from Python
            raise ValueError(
                "PREMUL_SUM with backend 'ring' needs a torch whose ReduceOp shows its factor "
                f"to Python (ReduceOp.factor); torch {torch.__version__}'s does not"
            )
        factor = op.factor
        return kind, float(factor.item() if isinstance(factor, torch.Tensor) else factor)
    return kind, 1.0


def core_reduces(kind, dtype: torch.dtype) -> bool:
    """Whether the core runs reduction `kind` of `dtype` itself (the others
    go through the gather-then-reduce fallback, reduce_locally)."""
    return kind in CORE_OPS and dtype in CORE_DTYPES


def reduce_locally(stacked: torch.Tensor, kind, factor: float) -> torch.Tensor:
    """Reduces `stacked` (ranks along dim 0) as `kind` does, keeping the dtype."""
    dtype = stacked.dtype
    work = stacked.to(torch.uint8) if dtype == torch.bool else stacked
    n = stacked.shape[0]
    if kind == RedOpType.SUM:
        result = work.sum(0) if dtype != torch.bool else work.amax(0)
    elif kind == RedOpType.PREMUL_SUM:
        result = (work * factor).sum(0)
    elif kind == RedOpType.AVG:
        if dtype.is_floating_point or dtype.is_complex:
            result = work.sum(0) / n
        else:
            result = torch.div(work.sum(0), n, rounding_mode="trunc")
    elif kind == RedOpType.PRODUCT:
        result = work.prod(0) if dtype != torch.bool else work.amin(0)
    elif kind == RedOpType.MIN:
        result = work.amin(0)
    elif kind == RedOpType.MAX:
        result = work.amax(0)
    elif kind in (RedOpType.BAND, RedOpType.BOR, RedOpType.BXOR):
        if dtype.is_floating_point or dtype.is_complex:
            raise ValueError(f"ReduceOp.{kind.name} needs an integer or bool tensor, got {dtype}")
        fn = {RedOpType.BAND: torch.bitwise_and, RedOpType.BOR: torch.bitwise_or, RedOpType.BXOR: torch.bitwise_xor}[
            kind
        ]
        result = work[0].clone()
        for i in range(1, n):
            result = fn(result, work[i])
    else:
        raise ValueError(f"backend 'ring' does not support reduction {kind}")
    return result.to(dtype)
