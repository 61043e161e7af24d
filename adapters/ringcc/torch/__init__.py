"""ringcc for PyTorch.

Importing this package registers the torch.distributed backend "ring" (an
installed ringcc also registers it when torch is imported, through torch's
`torch.backends` entry point):

    import torch.distributed as dist
    dist.init_process_group(backend="ring")

It is also Horovod's PyTorch API over ringcc's engine, so a Horovod script
changes one import (docs/torch.md, "Horovod API"):

    import ringcc.torch as hvd            # was: import horovod.torch as hvd
    hvd.init()

See docs/torch.md.
"""

from ringcc.func_run import RunError, run  # noqa: F401  (horovod.torch.run is horovod.run: ringcc.run)
from ringcc.torch.backend import (  # noqa: F401  (re-exported)
    BACKEND_NAME,
    ProcessGroupRing,
    create_process_group,
    is_registered,
    register_backend,
)
from ringcc.torch.errors import (  # noqa: F401  (re-exported: what failed collectives raise)
    CollectiveTimeoutError,
    InternalError,
    MismatchError,
    PeerFailureError,
)
from ringcc.torch.work import RingWork  # noqa: F401

register_backend()

# Horovod's torch API (hvd.init, hvd.allreduce, hvd.DistributedOptimizer, ...):
# the collectives (the package horovod/, which imports none of the modules
# below), then what is built on them.
# Horovod's elastic API (hvd.elastic.run, hvd.elastic.TorchState, ...).
from ringcc.torch import elastic  # noqa: E402,F401
from ringcc.torch.functions import (  # noqa: E402,F401
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from ringcc.torch.horovod import *  # noqa: E402,F401,F403
from ringcc.torch.optimizer import DistributedOptimizer  # noqa: E402,F401
from ringcc.torch.sync_batch_norm import SyncBatchNorm  # noqa: E402,F401
