"""`ringcc.tensorflow.keras`: the Keras 3 API (ringcc.keras) under
Horovod's name `horovod.tensorflow.keras`, with the TensorFlow API's
collectives and process sets beside it."""

import sys as _sys

from ringcc.keras import *  # noqa: F401,F403
from ringcc.keras import (  # noqa: F401
    DistributedOptimizer,
    broadcast_global_variables,
    broadcast_variables,
    callbacks,
    elastic,
    init,
    load_model,
    shutdown,
)

# Horovod's `horovod.tensorflow.keras.callbacks` and `.elastic` are modules
# scripts import by name (import horovod.tensorflow.keras.callbacks): the
# import system finds a submodule in sys.modules once its parent is loaded.
_sys.modules[__name__ + ".callbacks"] = callbacks
_sys.modules[__name__ + ".elastic"] = elastic
