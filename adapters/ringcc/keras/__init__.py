"""Horovod's Keras API over ringcc, for Keras 3 on every backend.

    import keras
    import ringcc.keras as hvd              # also ringcc.tensorflow.keras

    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size())), loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])

`DistributedOptimizer` gives the optimizer you pass a subclass of its class
whose `apply()` first averages the gradients over the ranks, with the
collectives of the backend Keras runs on: ringcc.tensorflow's ops
(TensorFlow; inside the traced train step), ringcc.jax's (JAX; inside the
jitted step) or ringcc.torch's Horovod API (PyTorch). Everything else here
(callbacks, broadcasts, metric averages) works on NumPy copies, so it is
the same on every backend. See docs/tensorflow.md, "Keras".

The package gathers its modules' names: basics.py (init, rank, size, the
ops), collectives.py (on NumPy copies), optimizer.py (DistributedOptimizer,
load_model), callbacks.py and elastic.py. None of them imports the package.
"""

from __future__ import annotations

from ringcc.elastic import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401  (re-exported)
from ringcc.keras import callbacks, elastic  # noqa: F401
from ringcc.keras.basics import (  # noqa: F401
    Average,
    Max,
    Min,
    Product,
    Sum,
    cross_rank,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
)
from ringcc.keras.collectives import (  # noqa: F401
    allgather,
    allgather_object,
    allreduce,
    broadcast,
    broadcast_global_variables,
    broadcast_object,
    broadcast_variables,
)
from ringcc.keras.optimizer import DistributedOptimizer, _DistributedOptimizerMixin, load_model  # noqa: F401
