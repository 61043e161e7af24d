"""Horovod's elastic API for PyTorch (`hvd.elastic` after
`import ringcc.torch as hvd`): run, TorchState, ElasticSampler, and the
framework-free State, ObjectState, HorovodInternalError and
HostsUpdatedInterrupt of ringcc.elastic. See docs/elastic.md."""

from ringcc.elastic import (  # noqa: F401  (re-exported)
    HorovodInternalError,
    HostsUpdatedInterrupt,
    HostUpdateResult,
    ObjectState,
    State,
    notification_manager,
    run_fn,
)
from ringcc.torch.elastic.sampler import ElasticSampler  # noqa: F401
from ringcc.torch.elastic.state import TorchState  # noqa: F401


def run(func):
    """Decorator for the elastic training function `func(state, ...)`.

    Before calling `func`, the state is synchronised from rank 0 (so workers
    just added start where the others are). When a worker fails, the others'
    collectives raise HorovodInternalError (or ringcc.PeerFailureError, or a
    TimeoutError when a worker hangs): the state goes back to its last
    commit. When hosts are added or removed, `state.commit()` raises
    HostsUpdatedInterrupt on every rank. Either way ringcc leaves the job,
    joins the membership ringrun's driver forms next (hvd.shutdown(),
    hvd.init()), the state's reset callbacks run, and `func` is called again.

    No collective may run before `func` (workers just added would meet the
    others' synchronisation with it)."""
    return run_fn(func, _reset)


def _reset():
    from ringcc.torch import horovod as _hvd

    _hvd.shutdown()
    _hvd.init()


__all__ = [
    "TorchState",
    "ElasticSampler",
    "run",
    "State",
    "ObjectState",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
]
