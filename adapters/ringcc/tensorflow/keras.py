"""`ringcc.tensorflow.keras`: the Keras 3 API (ringcc.keras) under
Horovod's name `horovod.tensorflow.keras`, with the TensorFlow API's
collectives and process sets beside it."""

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
