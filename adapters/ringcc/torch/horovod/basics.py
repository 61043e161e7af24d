"""Horovod's basics in ringcc.torch: the reduction operators, the errors,
and lifetime, topology and build queries (ringcc.horovod_basics, which
ringcc.tensorflow and ringcc.mxnet share, and the answers for torch
tensors)."""

from __future__ import annotations

import warnings

import ringcc
from ringcc import _core
from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401  (re-exported)
from ringcc.horovod_basics import Adasum, Average, HorovodBasics, Max, Min, Product, Sum  # noqa: F401  (re-exported)
from ringcc.torch.errors import as_dist_error
from ringcc.torch.horovod.names import reset_names

# --------------------------------------------------------------------------
# Reduction operators (ringcc.horovod_basics's) as the calls take them


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule for the deprecated `average=` argument: None and None
    mean Average; `average` alone picks Average or Sum (with a warning)."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        return op
    if average is not None:
        warnings.warn(
            "Parameter `average` has been replaced with `op` and will be removed", DeprecationWarning, stacklevel=3
        )
        return Average if average else Sum
    return Average


def core_op(op) -> int:
    if op == Adasum:
        raise NotImplementedError("ringcc does not implement Adasum; use hvd.Average or hvd.Sum")
    if isinstance(op, str):
        return ringcc._op(op)
    if op not in (Sum, Average, Min, Max, Product):
        raise ValueError(f"unknown reduction op {op!r}; use hvd.Sum, hvd.Average, hvd.Min, hvd.Max or hvd.Product")
    return int(op)


# --------------------------------------------------------------------------
# Errors (HorovodInternalError and HostsUpdatedInterrupt are ringcc.elastic's:
# hvd.elastic catches and raises them)


def internal_error(error: BaseException) -> BaseException:
    """`error` as an instance of a class that is also HorovodInternalError and
    torch.distributed.DistBackendError."""
    if isinstance(error, HorovodInternalError) or not isinstance(error, ringcc.RingccError):
        return error
    if isinstance(error, ringcc.NotInitializedError) and _core.is_initialized():
        # The engine stopped on a failure while ringcc is still initialized:
        # the core reports collectives enqueued after that as "shut down"
        # (NotInitializedError) instead of the failure itself. Say what it is.
        error = ringcc.PeerFailureError(
            f"ringcc's engine stopped after a failure of the job (a peer died or aborted; "
            f"ringcc's log names the rank), so this collective cannot run: {error}"
        )
    return as_dist_error(error, (HorovodInternalError,))


class NotInitializedError(ringcc.NotInitializedError, ValueError):
    """Raised by calls that need `hvd.init()` first (a ValueError as in
    Horovod, and a ringcc.NotInitializedError)."""


# --------------------------------------------------------------------------
# Lifetime and topology


def _on_join(first: bool) -> None:
    if first:
        reset_names()


_basics = HorovodBasics(
    "ringcc.torch",
    (NotInitializedError, "Horovod (ringcc.torch) has not been initialized; use hvd.init()."),
    on_join=_on_join,
)
require_init = _basics.require_init
init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
rank = _basics.rank
size = _basics.size
local_rank = _basics.local_rank
local_size = _basics.local_size
cross_rank = _basics.cross_rank
cross_size = _basics.cross_size
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks."""
    require_init()
    return ringcc.local_size() * ringcc.cross_size() == ringcc.size()


# --------------------------------------------------------------------------
# What this build has, for torch tensors (the answers every framework
# shares, CUDA among them, are ringcc.horovod_basics'): ringcc.torch moves
# them over ringcc's own shared memory and TCP, never through MPI; CUDA
# tensors go through the NCCL that ringcc finds at run time.


def mpi_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def nccl_built() -> bool:
    """True when ringcc found a usable NCCL (libnccl.so.2) at run time
    (ringcc.nccl_info()): CUDA tensors on distinct GPUs go through it."""
    return bool(ringcc.nccl_info()["found"])
