"""torch.distributed backend "ring": a Python ProcessGroup over the ringcc core.

    import torch.distributed as dist
    dist.init_process_group(backend="ring")   # under torchrun or ringrun

Installing ringcc registers the backend through torch's `torch.backends`
entry point (ringcc/torch_entry_point.py); `import ringcc.torch` registers it
too. No part of this is compiled against torch: the core takes CPU tensors
through DLPack, so one ringcc build serves every torch from 2.4 on.

How it fits c10d: `ProcessGroupRing` subclasses `dist.ProcessGroup`, and the
creator that `Backend.register_backend` gets returns it, so c10d uses it as
the group itself. Every collective is a method here (C++ callers such as DDP
and the functional collectives reach them through the pybind11 trampoline);
each returns a `RingWork` (never None: C++ would crash). Rendezvous goes
through the store that c10d hands the creator, so there is no second store
or port. Operations run on the core with the GIL released, in issue order.

An operation issued with `opts.asyncOp == False` (torch's Python API with
async_op=False, torch >= 2.6) runs synchronously and returns a completed
work; everything else is submitted to the core's queue and returns at once.

A failure of the job (dead peer, ranks that disagree, core failure) raises
`torch.distributed.DistBackendError` that is also the ringcc error
(`ringcc.PeerFailureError`, ...), from the call or from the work's wait().

This module composes the group of its parts (ringcc/torch/process_group/:
the machinery, the reducing collectives, those that move data,
point-to-point), adapts it to torch releases before 2.7, and registers
the backend.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import logging
import os
import sys
import threading

import torch
import torch.distributed as dist

from ringcc.torch.process_group.base import BACKEND_NAME, LIVE_GROUPS, GroupBase
from ringcc.torch.process_group.data_movement import DataMovementCollectives
from ringcc.torch.process_group.point_to_point import PointToPoint
from ringcc.torch.process_group.reductions import ReductionCollectives
from ringcc.torch.process_group.tensors import DEVICES
from ringcc.torch.work import EXIT_WAIT_S, Completer, RingWork

log = logging.getLogger("ringcc.torch")


class ProcessGroupRing(ReductionCollectives, DataMovementCollectives, PointToPoint, GroupBase):
    """A torch.distributed process group whose operations run on ringcc."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta | None = None) -> None:
        super().__init__(store, rank, size, timeout)
        self._start_point_to_point()

    def shutdown(self) -> None:
        """Leaves the group (destroy_process_group calls this); idempotent."""
        if self._closed:
            return
        self._closed = True
        LIVE_GROUPS.discard(self)
        self._completer.stop()
        self._stop_point_to_point()
        if self._stuck:
            # The core would wait for the stuck operation (until its own
            # timeout); leave it to a background thread. The completer's
            # threads wait for it too: not for them either.
            threading.Thread(target=self._comm.shutdown, name="ringcc-shutdown", daemon=True).start()
            return
        self._comm.shutdown()
        # Operations still queued have failed fast by now; what the threads
        # still run are futures' callbacks (see Completer).
        _warn_running(self._completer.join(EXIT_WAIT_S))

    def abort(self) -> None:
        self.shutdown()


# --------------------------------------------------------------------------
# torch before 2.7


def _torch_keeps_python_works() -> bool:
    """Whether C++ holds the Python object of a Work that Python hands it
    (c10d's PyWorkHolder, torch 2.7 and later)."""
    major, minor = (
        int("".join(c for c in part if c.isdigit()) or 0) for part in torch.__version__.split("+")[0].split(".")[:2]
    )
    return (major, minor) >= (2, 7)


def _c10d_owned(method):
    """Before torch 2.7 C++ keeps only the C++ half of a Python Work: once
    the RingWork is collected (DDP's constructor drops it at once), C++'s
    wait() is the base Work's, which nothing ever completes. There a
    collective hands back a C++ work wrapping the RingWork's future, which
    C++ owns and whose wait() returns when the collective is done."""
    wrap = torch._C._distributed_c10d._create_work_from_future

    @functools.wraps(method)
    def issue(self, *args, **kwargs):
        work = method(self, *args, **kwargs)
        if isinstance(work, RingWork) and not _from_python_api(sys._getframe(1)):
            return wrap(work.get_future())
        return work

    return issue


def _from_python_api(frame) -> bool:
    """Whether torch.distributed's Python functions (or ringcc's) made the
    call: they keep the RingWork, whose wait() raises the collective's
    error, where the C++ wrapper's wait() would only wait."""
    if frame is None:
        return False
    name = frame.f_code.co_filename.replace(os.sep, "/")
    return name.endswith("/torch/distributed/distributed_c10d.py") or "/ringcc/" in name


def _group_name_property(self) -> str:
    return self._group_name


if not _torch_keeps_python_works():
    for _name in (
        "allreduce",
        "allreduce_coalesced",
        "broadcast",
        "reduce",
        "allgather",
        "_allgather_base",
        "allgather_coalesced",
        "allgather_into_tensor_coalesced",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor_coalesced",
        "gather",
        "scatter",
        "alltoall",
        "alltoall_base",
        "barrier",
        "send",
        "recv",
        "end_coalescing",
    ):
        setattr(ProcessGroupRing, _name, _c10d_owned(getattr(ProcessGroupRing, _name)))
    # torch 2.5 and 2.6 read a group's name from its C++ backends, which a
    # Python process group has none of.
    ProcessGroupRing._set_group_name = ProcessGroupRing.setGroupName
    ProcessGroupRing._set_group_desc = ProcessGroupRing.setGroupDesc
    ProcessGroupRing.group_name = property(_group_name_property)
    ProcessGroupRing.group_desc = property(ProcessGroupRing.getGroupDesc)


# --------------------------------------------------------------------------
# Registration


def create_process_group(store, rank: int, size: int, timeout) -> ProcessGroupRing:
    """The creator that Backend.register_backend gets: c10d passes the
    group's prefixed store, this rank within the group, the group's size and
    its timeout."""
    return ProcessGroupRing(store, rank, size, timeout)


def is_registered() -> bool:
    return BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {})


def register_backend() -> None:
    """Registers backend "ring" with torch.distributed (idempotent); under
    srun, env:// then finds the job from SLURM (ringcc.slurm_torch)."""
    if os.environ.get("SLURM_PROCID"):
        from ringcc import slurm_torch  # noqa: PLC0415 - only under SLURM

        slurm_torch.install()
    if is_registered():
        return
    dist.Backend.register_backend(BACKEND_NAME, create_process_group, devices=list(DEVICES))


def _warn_running(threads: list[str]) -> None:
    if threads:
        log.warning(
            "went on after waiting %g s for future callbacks still running on %s; one that takes "
            "the GIL while the interpreter finalizes aborts the process",
            EXIT_WAIT_S,
            ", ".join(threads),
        )


def _shutdown_live_groups() -> None:
    # atexit runs before the interpreter finalizes: the completers' daemon
    # threads may still take the GIL then, and finish what they run.
    for group in list(LIVE_GROUPS):
        try:
            group.shutdown()
        except Exception:  # the process is ending
            pass
    _warn_running(Completer.stop_shared(EXIT_WAIT_S))


atexit.register(_shutdown_live_groups)
