"""The torch peers: torch.distributed's gloo and nccl backends, in the
bench's own processes.

The process group joins through torch's env:// rendezvous (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT, which ringrun sets); the first peer opened is
torch's default group, a second one a group of its own. On the CPU the
tensors share the bench's NumPy buffers (torch.from_numpy), so no copies are
timed; with --device cuda they are copies on the rank's GPU
(ringcc.bench.cuda_buffers), and nccl runs only there.
"""

import ipaddress
import os
import socket
import sys
import threading
from datetime import timedelta

import numpy as np

from .host_addresses import address_toward, interface_holding
from .measure import Backend

ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def open_gloo(world, timeout_s, device=None):
    """Returns (TorchPeer for gloo, None), or (None, reason) when gloo cannot be used."""
    return open_torch_peer("gloo", world, timeout_s, device)


def open_torch_peer(name, world, timeout_s, device=None, shares_gpu=False):
    """(TorchPeer, None) for torch's backend `name` ("gloo" or "nccl"), or
    (None, reason). device: None (CPU) or the rank's torch CUDA device;
    shares_gpu: some ranks share a GPU (NCCL refuses them)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        return None, f"torch is not importable ({e})"
    if not dist.is_available():
        return None, "this torch build has no torch.distributed"
    if name == "gloo" and not dist.is_gloo_available():
        return None, "this torch build has no gloo backend"
    if name == "nccl":
        if device is None:
            return None, "torch's nccl backend runs on CUDA tensors only (use --device cuda)"
        if not dist.is_nccl_available():
            return None, "this torch build has no nccl backend"
        if shares_gpu:
            return None, 'ranks share a GPU, which NCCL refuses ("Duplicate GPU detected")'
    missing = [v for v in ENV if not os.environ.get(v)]
    if missing:
        return None, "torch's env:// variables are not set: " + ", ".join(missing)
    if int(os.environ["WORLD_SIZE"]) != world:
        return None, f"WORLD_SIZE={os.environ['WORLD_SIZE']} but ringcc has {world} ranks"
    if name == "gloo":
        give_gloo_an_interface()
    timeout = timedelta(seconds=timeout_s)
    watchdog = SetupWatchdog(name, timeout_s + SETUP_GRACE_S)
    try:
        if not dist.is_initialized():
            kwargs = {"device_id": device} if name == "nccl" else {}
            dist.init_process_group(name, init_method="env://", timeout=timeout, **kwargs)
            group = None
        else:
            group = dist.new_group(backend=name, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - any failure means "peer unavailable"
        return None, f"init_process_group('{name}') failed: {e}"
    finally:
        watchdog.cancel()
    return TorchPeer(name, torch, dist, group, device), None


# How long past the peer timeout a rank may stay in the peer's set-up.
SETUP_GRACE_S = 10.0


class SetupWatchdog:
    """Ends the process when a torch backend's set-up outlasts its timeout.
    A rank whose gloo cannot connect gives up at once, while a rank waiting
    for that connection waits with no bound of its own (torch 2.13's gloo
    does not apply the group's timeout to it): the rank that gave up then
    waits for this one in the bench's next collective, and the job would
    hang. Exiting lets the launcher stop every rank with this message."""

    def __init__(self, name, after_s):
        self._timer = threading.Timer(after_s, self._fire, args=(name, after_s))
        self._timer.daemon = True
        self._timer.start()

    @staticmethod
    def _fire(name, after_s):
        rank = os.environ.get("RANK", "?")
        print(
            f"ringcc.bench: rank {rank}: torch's {name} did not finish its set-up within {after_s:g} s "
            f"(--peer-timeout plus {SETUP_GRACE_S:g} s); another rank's {name} probably could not connect to "
            "this one (GLOO_SOCKET_IFNAME chooses gloo's interface). Stopping the job.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(3)

    def cancel(self):
        self._timer.cancel()


def give_gloo_an_interface():
    """Sets GLOO_SOCKET_IFNAME, where it is not set, to gloo_interface()'s
    choice for this host (before torch's gloo starts)."""
    master = os.environ.get("MASTER_ADDR")
    if os.environ.get("GLOO_SOCKET_IFNAME") or not master:
        return
    chosen = gloo_interface(master)
    if chosen:
        os.environ["GLOO_SOCKET_IFNAME"] = chosen


def gloo_interface(master_addr):
    """The interface gloo should use on this host, or None to leave gloo's
    own choice. Left alone, gloo takes the address of the machine's host
    name, which on many hosts (and in network namespaces) is a loopback
    address: the ranks of other hosts then cannot reach this one, and gloo
    fails on some ranks while the others wait for them (SetupWatchdog).
    This is the interface ringcc's links chose from
    RINGCC_SOCKET_IFNAME (ringrun --network-interface) or Horovod's and
    NCCL's variables, else the one that holds this host's address toward
    rank 0's (MASTER_ADDR) when that is not a loopback address."""
    try:
        from ringcc import _core

        named = _core._socket_interface().get("interface")
    except Exception:  # noqa: BLE001 - a setting that matches nothing: ringcc's init said so already
        named = None
    if named:
        return named
    try:
        if ipaddress.ip_address(socket.getaddrinfo(master_addr, None)[0][4][0]).is_loopback:
            return None
    except (OSError, ValueError, IndexError):
        return None
    return interface_toward(master_addr)


def interface_toward(address):
    """The name of this host's interface whose address the kernel would send
    from toward `address` (IPv4), or None."""
    local = address_toward(address)
    return interface_holding(local) if local and ":" not in local else None


class TorchPeer(Backend):
    def __init__(self, name, torch, dist, group, device):
        self.name = name
        self.torch, self.dist, self.group, self.device = torch, dist, group, device
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        # all_gather_into_tensor is deprecated in favour of all_gather_single in newer torch.
        self._allgather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self.version = f"torch {torch.__version__}"
        if name == "nccl":
            version = torch.cuda.nccl.version()
            self.version += " (NCCL " + ".".join(str(v) for v in version) + ")"

    def close(self):
        if self.group is None and self.dist.is_initialized():
            self.dist.destroy_process_group()

    def tensor(self, a):
        """A tensor sharing a's memory (bfloat16 goes through a uint16 view)."""
        if a.dtype.name == "bfloat16":
            return self.torch.from_numpy(a.view(np.uint16)).view(self.torch.bfloat16)
        return self.torch.from_numpy(a)

    def max_over_ranks(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64)
        if self.device is not None and self.name == "nccl":
            t = t.to(self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.group)
        return float(t.item())

    def barrier(self):
        if self.name == "nccl":
            self.max_over_ranks(0.0)  # nccl's barrier guesses a device; this one knows it
        else:
            self.dist.barrier(group=self.group)

    def call(self, op):
        dist, group = self.dist, self.group
        if op == "allreduce":
            return lambda t, o: dist.all_reduce(t, group=group)
        if op == "allgather":
            f = self._allgather
            return lambda t, o: f(o, t, group=group)
        if op == "reduce_scatter":
            return lambda t, o: dist.reduce_scatter_tensor(o, t, group=group)
        src = dist.get_global_rank(group, 0) if group is not None else 0
        return lambda t, o: dist.broadcast(t, src, group=group)

    def loop(self, op, x, out):
        call = self.call(op)
        if self.device is not None:
            from .cuda_buffers import cuda_loop

            return cuda_loop(self.device, x, out, call)
        t = self.tensor(x)
        o = self.tensor(out) if out is not None else None

        def run(n):
            for _ in range(n):
                call(t, o)

        return run


GlooBackend = TorchPeer  # the name this module's peer had
