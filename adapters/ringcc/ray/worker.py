"""The Ray actor of one rank: it reports where it runs, takes the job's
variables into its process environment (where ringcc.init() reads them),
holds the executable object of Horovod's API and runs what the driver sends.

The job secret reaches it as an argument of join_job, through Ray's own
channels, and lives only in this process's memory: never on a command line,
in a file or in the environment Ray starts the process with."""

from __future__ import annotations

import os
import socket
import sys


class RingccWorker:
    def __init__(self) -> None:
        self.executable = None

    def where(self) -> dict:
        """The node's address, this process and the GPUs Ray gave it."""
        import ray

        return {
            "node_address": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
        }

    def free_ports(self, count: int) -> list[int]:
        """Ports free on this worker's host now (rank 0's stores)."""
        from ringcc.free_ports import free_ports

        return free_ports(count)

    def join_job(self, variables: dict[str, str]) -> None:
        os.environ.update(variables)

    def start_executable(self, executable_cls=None, args=None, kwargs=None) -> None:
        self.executable = executable_cls(*(args or ()), **(kwargs or {})) if executable_cls else None

    def execute(self, fn):
        """fn(executable): Horovod's execute()."""
        return fn(self.executable)

    def run(self, fn, args, kwargs):
        return fn(*args, **kwargs)

    def leave_job(self) -> list[str]:
        """Leaves what the functions run here joined: torch.distributed's
        group, ringcc's job (with its process sets). Returns what it left."""
        left = []
        distributed = sys.modules.get("torch.distributed")
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            distributed.destroy_process_group()
            left.append("torch.distributed")
        horovod = sys.modules.get("ringcc.torch.horovod")
        ringcc = sys.modules.get("ringcc")
        if horovod is not None and horovod.is_initialized():
            horovod.shutdown()
            left.append("ringcc")
        elif ringcc is not None and ringcc.is_initialized():
            ringcc.shutdown()
            left.append("ringcc")
        return left
