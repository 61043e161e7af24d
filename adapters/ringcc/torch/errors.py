"""ringcc's errors as torch.distributed errors.

A collective of backend "ring" (and of the Horovod API) that fails because of
the job (a peer died, the ranks disagree on a tensor, the core failed, or the
job was shut down) raises an instance of a class that is at once
`torch.distributed.DistBackendError` (so a `DistError`, a `RuntimeError`) and
the ringcc error it comes from, so both

    except torch.distributed.DistBackendError:   # torch's way, as for gloo/NCCL
    except ringcc.PeerFailureError:              # ringcc's way

catch it. Errors about the caller's arguments keep their ValueError/TypeError
classes (as torch's own checks raise them), and `ringcc.TimeoutError` stays a
builtin `TimeoutError`: Python cannot make one class both an OSError and a
RuntimeError (docs/torch.md, "Errors").
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch.distributed as dist

from ringcc import _core

DistBackendError = dist.DistBackendError

# The ringcc errors that say the job, not the call, failed.
JOB_FAILURES = (_core.PeerFailureError, _core.MismatchError, _core.InternalError, _core.NotInitializedError)

_combined: dict[tuple[type, tuple[type, ...]], type | None] = {}


def combined_class(cls: type, extra: tuple[type, ...] = ()) -> type | None:
    """A class deriving from `extra`, DistBackendError and `cls` (named as
    `cls`, in module ringcc.torch); None when Python cannot combine them."""
    key = (cls, extra)
    found = _combined.get(key, False)
    if found is not False:
        return found
    bases = tuple(b for b in (*extra, DistBackendError) if not issubclass(cls, b)) + (cls,)
    try:
        found = type(cls.__name__, bases, {"__module__": "ringcc.torch", "__doc__": cls.__doc__})
    except TypeError:  # e.g. ringcc.TimeoutError: an OSError's layout
        found = None
    _combined[key] = found
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
