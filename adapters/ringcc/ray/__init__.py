"""ringcc on a Ray cluster: RayExecutor, Horovod's Ray API
(horovod.ray.RayExecutor), which runs a ringcc job on Ray actors placed by a
placement group (docs/ray.md). Ray is imported only when a RayExecutor
starts, so this package imports without it. Ray Train needs nothing from
here: TorchTrainer(torch_config=TorchConfig(backend="ring")) uses the
torch.distributed backend that `import torch` registers."""

from ringcc.ray.errors import RankFailedError
from ringcc.ray.executor import RayExecutor
from ringcc.ray.settings import RaySettings, create_settings

__all__ = ["RankFailedError", "RayExecutor", "RaySettings", "create_settings"]
