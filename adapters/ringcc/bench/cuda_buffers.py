"""CUDA buffers for `--device cuda` (ringcc.bench.allreduce): torch tensors on this
rank's GPU that mirror the NumPy buffers ringcc.bench.measure fills and checks.

A loop over CUDA tensors calls the collective and then
torch.cuda.synchronize(), iteration by iteration: the time of a blocking
call, as a training step that waits for its gradients sees it (and as the
issue's goals compare ringcc with torch's nccl and gloo backends). Its
`fetch()` copies the device buffers back into the NumPy ones, for the
result check.
"""

import numpy as np


def device_for(local_rank):
    """This rank's CUDA device (local rank modulo the GPUs torch sees), made
    torch's current one; raises RuntimeError without a GPU."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device")
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def to_device(torch, a, device):
    """A CUDA tensor holding NumPy array a (bfloat16 through its bits)."""
    if a is None:
        return None
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).to(device).view(torch.bfloat16)
    return torch.from_numpy(a).to(device)


def to_host(torch, t, a):
    """Copies CUDA tensor t into NumPy array a."""
    if t is None:
        return
    if a.dtype.name == "bfloat16":
        a.view(np.int16)[...] = t.view(torch.int16).cpu().numpy()
    else:
        a[...] = t.cpu().numpy()


def cuda_loop(device, x, out, call):
    """A bench loop over CUDA copies of x (and out): call(tx, to) runs the
    collective once; each iteration waits for the device."""
    import torch

    tx, to = to_device(torch, x, device), to_device(torch, out, device)
    synchronize = torch.cuda.synchronize

    def run(n):
        for _ in range(n):
            call(tx, to)
            synchronize()

    def fetch():
        synchronize()
        to_host(torch, tx, x)
        if out is not None:
            to_host(torch, to, out)

    run.fetch = fetch
    return run
