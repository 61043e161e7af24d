"""ringcc's errors as torch.distributed errors.

A collective of backend "ring" (and of the Horovod API) that fails because of
the job (a peer died, the ranks disagree on a tensor, the core failed, or the
job was shut down) raises an instance of a class that is at once
`torch.distributed.DistBackendError` (so a `DistError`, a `RuntimeError`) and
the ringcc error it comes from, so both

    except torch.distributed.DistBackendError:   # torch's way, as for gloo/NCCL
    except ringcc.PeerFailureError:              # ringcc's way

catch it. Errors about the caller's arguments keep their ValueError/TypeError
classes (as torch's own checks raise them), and backend "ring"'s
`ringcc.TimeoutError` stays the builtin `TimeoutError` that `work.wait()`
raises (docs/torch.md, "Errors"); where torch needs a DistBackendError for a
timeout (a work's future, DDP's backward), `CollectiveTimeoutError` stands in
for it. The Horovod API's timeout is a HorovodInternalError too, as every
failure of a Horovod collective is (`Horovod.TimeoutError`).

Every class here lives under the name it reports (`__module__` and
`__qualname__`), so errors pickle and unpickle as themselves (torch pickles
the values of futures, multiprocessing pickles exceptions):
`ringcc.torch.PeerFailureError` for torch.distributed, and
`ringcc.torch.errors.Horovod.PeerFailureError` (also a HorovodInternalError)
for the Horovod API.
"""

from __future__ import annotations

import torch.distributed as dist

from ringcc import _core
from ringcc.elastic import HorovodInternalError

DistBackendError = dist.DistBackendError

# The ringcc errors that say the job, not the call, failed.
JOB_FAILURES = (_core.PeerFailureError, _core.MismatchError, _core.InternalError, _core.NotInitializedError)


class PeerFailureError(DistBackendError, _core.PeerFailureError):
    """A peer died, closed its connection or aborted (ringcc.PeerFailureError),
    as a torch.distributed.DistBackendError; the group is unusable."""


class MismatchError(DistBackendError, _core.MismatchError):
    """The ranks disagree on the collective, dtype, size or root
    (ringcc.MismatchError), as a torch.distributed.DistBackendError."""


class InternalError(DistBackendError, _core.InternalError):
    """A system call failed inside ringcc (ringcc.InternalError), as a
    torch.distributed.DistBackendError."""


class NotInitializedError(DistBackendError, _core.NotInitializedError):
    """The group or ringcc was shut down (ringcc.NotInitializedError), as a
    torch.distributed.DistBackendError. (`ringcc.torch.NotInitializedError`
    is the Horovod API's, a ValueError.)"""


class CollectiveTimeoutError(DistBackendError, _core.RingccError):
    """A collective did not complete within its group's timeout, as the
    torch.distributed.DistBackendError that gloo and NCCL raise for one: what
    a work's future and DDP's backward report. Its `__cause__` is the
    ringcc.TimeoutError (which `work.wait()` raises)."""


class Horovod:
    """The Horovod API's errors: each class is also HorovodInternalError
    (filled in below, one per ringcc error)."""


_combined: dict[tuple[type, tuple[type, ...]], type | None] = {
    (_core.PeerFailureError, ()): PeerFailureError,
    (_core.MismatchError, ()): MismatchError,
    (_core.InternalError, ()): InternalError,
    (_core.NotInitializedError, ()): NotInitializedError,
}


class _Made:
    """Classes made on demand for other combinations (subclasses of ringcc's
    errors), each under a name of its own here so that it pickles."""


def _bases(cls: type, extra: tuple[type, ...]) -> tuple[type, ...]:
    return tuple(b for b in (*extra, DistBackendError) if not issubclass(cls, b)) + (cls,)


def _make(cls: type, extra: tuple[type, ...], home: type, name: str) -> type | None:
    """A class deriving from `extra`, DistBackendError and `cls`, named
    `cls`'s name and kept as `home.<name>`; None when Python cannot combine
    their layouts."""
    try:
        made = type(cls.__name__, _bases(cls, extra), {"__module__": __name__, "__doc__": cls.__doc__})
    except TypeError:
        return None
    made.__qualname__ = f"{home.__qualname__}.{name}"
    setattr(home, name, made)
    return made


for _cls in (
    _core.RingccError,
    _core.PeerFailureError,
    _core.MismatchError,
    _core.InternalError,
    _core.NotInitializedError,
    _core.InvalidArgumentError,
    _core.UnsupportedTypeError,
):
    _combined[(_cls, (HorovodInternalError,))] = _make(_cls, (HorovodInternalError,), Horovod, _cls.__name__)
_combined[(_core.TimeoutError, ())] = None
_combined[(_core.TimeoutError, (HorovodInternalError,))] = _make(
    _core.TimeoutError, (HorovodInternalError,), Horovod, "TimeoutError"
)


def combined_class(cls: type, extra: tuple[type, ...] = ()) -> type | None:
    """A class deriving from `extra`, DistBackendError and `cls` (named as
    `cls`); None when Python cannot combine them."""
    key = (cls, extra)
    found = _combined.get(key, False)
    if found is not False:
        return found
    name = cls.__name__
    suffix = 2
    while hasattr(_Made, name):
        name = f"{cls.__name__}{suffix}"
        suffix += 1
    found = _combined[key] = _make(cls, extra, _Made, name)
    return found


def as_dist_error(error: BaseException, extra: tuple[type, ...] = ()) -> BaseException:
    """`error` as an instance of a class that is also DistBackendError (and
    the classes in `extra`) when it is a failure of the job; other errors as
    they are."""
    if isinstance(error, DistBackendError) and all(isinstance(error, c) for c in extra):
        return error
    if not isinstance(error, JOB_FAILURES) and not (extra and isinstance(error, _core.RingccError)):
        return error
    cls = combined_class(type(error), extra)
    if cls is None:
        return error
    mapped = cls(*error.args)
    mapped.__cause__ = error
    return mapped


def future_error(error: BaseException) -> BaseException:
    """What a work's future and DDP's backward report for `error`: a timeout
    as CollectiveTimeoutError (a DistBackendError, as torch's own backends
    report one), every other error as it is."""
    if isinstance(error, _core.TimeoutError):
        mapped = CollectiveTimeoutError(*error.args)
        mapped.__cause__ = error
        return mapped
    return error
