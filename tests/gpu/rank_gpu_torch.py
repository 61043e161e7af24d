"""Backend "ring" (torch.distributed) and ringcc.torch (Horovod's API) on
CUDA tensors, checked inside one group of ranks on a machine with a GPU:

    ringrun -np 2 python tests/gpu/rank_gpu_torch.py --out DIR

Every rank uses the machine's first GPU (two ranks share it: CUDA IPC).
Each case checks results against values every rank computes itself, and
stream order: the inputs are written by work queued behind a few
milliseconds of matrix products, and the results are read by work queued
after the call on the current stream, with no host synchronisation in
between. tests/gpu/test_gpu.py starts the group; it skips without a GPU.
"""

from __future__ import annotations

import copy
import datetime
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # tests/harness
from rank_harness import CaseList, expect  # noqa: E402

# Imported by main(), so that pytest can read CASES without torch.
torch = dist = nn = F = None
DEVICE = None

CASES = CaseList()


def delay(stream=None):
    """Queues a few milliseconds of matrix products on `stream` (default:
    the current one) and returns a 0-element-sized dependency: a tensor
    that is zero once they are done."""
    context = torch.cuda.stream(stream) if stream is not None else torch.cuda.stream(torch.cuda.current_stream())
    with context:
        a = torch.full((2048, 2048), 1.0 / 2048, device=DEVICE)  # a @ a == a, exactly
        for _ in range(12):
            a = a @ a
        return a[0, 0] * 0


def late(shape, value, dtype=None):
    """A tensor of `value` (float32 unless `dtype`) written after delay()
    on the current stream."""
    dtype = dtype or torch.float32
    x = torch.zeros(shape, dtype=dtype, device=DEVICE)
    x.add_((delay() + value).to(dtype))
    return x


def all_equal(t, want, what):
    host = t.detach().float().cpu()
    ok = bool((host == torch.as_tensor(want, dtype=torch.float32)).all())
    expect(ok, f"{what}: got {host.flatten()[:6].tolist()}, expected {torch.as_tensor(want).flatten()[:6].tolist()}")


def triangle(n):
    return n * (n + 1) // 2


# --------------------------------------------------------------------------
# backend "ring"


@CASES.case("ring/allreduce-sync-on-the-current-stream")
def ring_sync(ctx):
    x = late(1 << 16, ctx.rank + 1.0)
    work = dist.all_reduce(x)  # async_op=False: inline, on the current stream
    y = x * 2  # queued after it: sees the result
    all_equal(y, 2.0 * triangle(ctx.size), "x * 2 after a synchronous all_reduce")
    expect(work is None or work.is_completed(), "a synchronous all_reduce's work is complete")


@CASES.case("ring/async-wait-orders-the-waiting-stream")
def ring_async(ctx):
    n = ctx.size
    x = late(1 << 16, ctx.rank + 1.0)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    all_equal(x * 2, 2.0 * triangle(n), "x * 2 after work.wait()")
    # Waited for on another stream: that stream sees the result.
    other = torch.cuda.Stream(DEVICE)
    x2 = late(1000, 2.0 * (ctx.rank + 1))
    work2 = dist.all_reduce(x2, op=dist.ReduceOp.MAX, async_op=True)
    with torch.cuda.stream(other):
        work2.wait()
        y2 = x2 + 1
    other.synchronize()
    all_equal(y2, 2.0 * n + 1, "x2 + 1 on the stream that waited")
    # The future DDP uses: a CUDA future, its value the output tensors.
    x3 = late(10, 1.0)
    future = dist.all_reduce(x3, async_op=True).get_future()
    value = future.wait()
    expect(isinstance(value, list) and value[0] is x3, f"future value {type(value)}")
    all_equal(x3 + 0, float(n), "the future's result")
    # synchronize() blocks the host until the device is done.
    x4 = late(10, 1.0)
    work4 = dist.all_reduce(x4, async_op=True)
    work4.synchronize()
    all_equal(x4, float(n), "after work.synchronize()")


@CASES.case("ring/collectives")
def ring_collectives(ctx):
    n, r = ctx.size, ctx.rank
    # broadcast
    b = late(7, float(r + 10))
    dist.broadcast(b, src=n - 1)
    all_equal(b, float(n - 1 + 10), "broadcast")
    # all_gather into a list, and into a tensor
    outs = [torch.empty(3, device=DEVICE) for _ in range(n)]
    dist.all_gather(outs, late(3, float(r)))
    for q in range(n):
        all_equal(outs[q], float(q), f"all_gather output {q}")
    flat = torch.empty(3 * n, device=DEVICE)
    dist.all_gather_into_tensor(flat, late(3, float(r)))
    all_equal(flat, torch.arange(n, dtype=torch.float32).repeat_interleave(3), "all_gather_into_tensor")
    # reduce_scatter_tensor (sum): block q of rank r holds r + q
    src = late(2 * n, 0.0) + torch.arange(n, device=DEVICE).repeat_interleave(2) + r
    out = torch.empty(2, device=DEVICE)
    dist.reduce_scatter_tensor(out, src)
    all_equal(out, float(sum(q + r for q in range(n))), "reduce_scatter_tensor")
    # all_to_all_single with uneven splits: rank r sends q + 1 rows to rank q
    send = torch.cat([late(q + 1, float(100 * r + q)) for q in range(n)])
    recv = torch.empty(n * (r + 1), device=DEVICE)
    dist.all_to_all_single(recv, send, output_split_sizes=[r + 1] * n, input_split_sizes=[q + 1 for q in range(n)])
    want = torch.cat([torch.full((r + 1,), float(100 * q + r)) for q in range(n)])
    all_equal(recv, want, "all_to_all_single")
    # reduce (MAX) to rank 0; gather to rank 0; scatter from the last rank
    m = late(5, float(r))
    dist.reduce(m, dst=0, op=dist.ReduceOp.MAX)
    if r == 0:
        all_equal(m, float(n - 1), "reduce MAX on the root")
    g = late(2, float(r))
    gathered = [torch.empty(2, device=DEVICE) for _ in range(n)] if r == 0 else None
    dist.gather(g, gathered, dst=0)
    if r == 0:
        for q in range(n):
            all_equal(gathered[q], float(q), f"gather {q}")
    s = torch.empty(2, device=DEVICE)
    pieces = [late(2, float(q * 3)) for q in range(n)] if r == n - 1 else None
    dist.scatter(s, pieces, src=n - 1)
    all_equal(s, float(r * 3), "scatter")
    # AVG, bfloat16, a non-contiguous tensor, a bitwise reduction (gathered
    # and reduced on the device), PREMUL_SUM
    avg = late(6, float(r))
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    all_equal(avg, (n - 1) / 2.0, "AVG")
    bf = late(5, float(r + 1), torch.bfloat16)
    dist.all_reduce(bf)
    all_equal(bf, float(triangle(n)), "bfloat16 SUM")
    t = late((4, 3), float(r + 1)).t()
    dist.all_reduce(t)
    all_equal(t, float(triangle(n)), "a transposed (non-contiguous) tensor")
    bits = torch.full((4,), 0b111 ^ (1 << r), dtype=torch.int32, device=DEVICE)
    dist.all_reduce(bits, op=dist.ReduceOp.BAND)
    want_bits = 0b111
    for q in range(n):
        want_bits &= 0b111 ^ (1 << q)
    all_equal(bits, float(want_bits), "BAND")
    pm = late(3, float(r + 1))
    premul = dist._make_nccl_premul_sum(2.0)
    if hasattr(premul, "factor"):
        dist.all_reduce(pm, op=premul)
        all_equal(pm, 2.0 * triangle(n), "PREMUL_SUM 2")
    else:  # this torch keeps the factor from Python: a clear refusal
        try:
            dist.all_reduce(pm, op=premul)
            raise AssertionError("PREMUL_SUM without ReduceOp.factor was not refused")
        except ValueError as error:
            if "ReduceOp.factor" not in str(error):
                raise AssertionError(f"PREMUL_SUM refusal: {error}") from error
    dist.barrier()


@CASES.case("ring/send-recv-through-host-memory", min_size=2)
def ring_p2p(ctx):
    r = ctx.rank
    if r == 0:
        dist.send(late(9, 42.0), dst=1)
        got = torch.empty(9, device=DEVICE)
        dist.recv(got, src=1)
        all_equal(got, 43.0, "recv on rank 0")
    elif r == 1:
        got = torch.empty(9, device=DEVICE)
        dist.recv(got, src=0)
        all_equal(got, 42.0, "recv on rank 1")
        dist.send(late(9, 43.0), dst=0)


_GLOO = {}


def gloo_group():
    if "group" not in _GLOO:
        _GLOO["group"] = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    return _GLOO["group"]


@CASES.case("ring/ddp-matches-gloo")
def ring_ddp(ctx):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(DEVICE)
    ring_model, gloo_model = copy.deepcopy(model), copy.deepcopy(model)
    # Small buckets: several allreduces per step, overlapping the backward pass.
    ddp_ring = DDP(ring_model, device_ids=[0], bucket_cap_mb=0.001)
    ddp_gloo = DDP(gloo_model, device_ids=[0], process_group=gloo_group(), bucket_cap_mb=0.001)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ddp_ring, ddp_gloo)]
    for step in range(4):
        g = torch.Generator().manual_seed(1000 * step + ctx.rank)
        inputs = torch.randn(8, 16, generator=g).to(DEVICE)
        target = torch.randn(8, 4, generator=g).to(DEVICE)
        for ddp, opt in zip((ddp_ring, ddp_gloo), opts):
            opt.zero_grad()
            F.mse_loss(ddp(inputs), target).backward()
            opt.step()
    torch.cuda.synchronize()
    for (name, p_ring), p_gloo in zip(ring_model.named_parameters(), gloo_model.parameters()):
        close = torch.allclose(p_ring, p_gloo, rtol=1e-5, atol=1e-6)
        expect(close, f"{name}: ring and gloo differ by {(p_ring - p_gloo).abs().max().item():.3g}")
    # Every rank holds the same model.
    flat = torch.cat([p.detach().flatten() for p in ring_model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(ctx.size)]
    dist.all_gather(everyone, flat)
    for q in range(ctx.size):
        expect(torch.equal(everyone[q], flat), f"rank {q}'s parameters differ from this rank's")


def bounded(fut, what, seconds=60.0):
    """fut.wait(), failing instead of hanging past `seconds`."""
    deadline = time.monotonic() + seconds
    while not fut.done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: the future did not complete within {seconds:g} s")
        time.sleep(0.001)
    return fut.wait()


@CASES.case("ring/futures-callbacks-and-comm-hooks")
def ring_futures(ctx):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    n = ctx.size

    # CUDA futures whose callbacks issue a collective and wait for its
    # future (PowerSGD's pattern), three levels deep.
    def level(fut):
        value = fut.value()
        t = value[0] if isinstance(value, list) else value
        return dist.all_reduce(t + 1, async_op=True).get_future().wait()[0]

    fut = dist.all_reduce(late(4, 1.0), async_op=True).get_future()
    want = float(n)
    for _ in range(3):
        fut = fut.then(level)
        want = n * (want + 1)
    all_equal(bounded(fut, "callbacks"), want, "three levels of callbacks")
    # A failed work's CUDA future is errored, to C++ too.
    failed = dist.all_reduce(torch.ones(2 + ctx.rank, device=DEVICE), async_op=True).get_future()
    try:
        bounded(failed, "errored future")
        expect(False, "the future of a mismatched all_reduce returned")
    except AssertionError:
        raise
    except Exception as error:  # noqa: BLE001 - what we are here to see
        expect("disagree" in str(error), f"errored future: {error}")
    cpp = torch._C._distributed_c10d._create_work_from_future(failed)
    expect(not cpp.is_success(), "C++ sees a successful future for a failed work")
    # DDP with comm hooks on CUDA, ring against gloo (one bucket: PowerSGD's
    # callbacks issue collectives).
    hooks = {
        "fp16_compress_hook": lambda group: (group, default_hooks.fp16_compress_hook),
        "powerSGD_hook": lambda group: (
            powersgd.PowerSGDState(process_group=group, start_powerSGD_iter=2, min_compression_rate=0.5),
            powersgd.powerSGD_hook,
        ),
    }
    for name, make in hooks.items():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(DEVICE)
        models = {"ring": copy.deepcopy(model), "gloo": copy.deepcopy(model)}
        runs = {}
        for backend, group in (("ring", None), ("gloo", gloo_group())):
            ddp = DDP(models[backend], device_ids=[0], process_group=group, bucket_cap_mb=25)
            ddp.register_comm_hook(*make(group))
            runs[backend] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.1))
        for step in range(5):
            g = torch.Generator().manual_seed(1000 * step + ctx.rank)
            inputs = torch.randn(8, 32, generator=g).to(DEVICE)
            target = torch.randn(8, 8, generator=g).to(DEVICE)
            for ddp, opt in runs.values():
                opt.zero_grad()
                F.mse_loss(ddp(inputs), target).backward()
                opt.step()
        torch.cuda.synchronize()
        for (pname, p), q in zip(models["ring"].named_parameters(), models["gloo"].parameters()):
            expect(
                torch.allclose(p, q, rtol=1e-4, atol=1e-5),
                f"{name}, {pname}: ring and gloo differ by {(p - q).abs().max().item():.3g}",
            )


@CASES.case("ring/one-device-per-call")
def ring_devices(ctx):
    # A CPU tensor and a CUDA tensor in one call: a clear error on every rank.
    outs = [torch.empty(2) for _ in range(ctx.size)]
    try:
        dist.all_gather(outs, torch.ones(2, device=DEVICE))
    except (ValueError, RuntimeError) as error:
        expect("one device" in str(error), f"message: {error}")
    else:
        expect(False, "a call mixing CPU and CUDA tensors should raise")
    # The group goes on, with either kind.
    x = torch.ones(3)
    dist.all_reduce(x)
    all_equal(x, float(ctx.size), "a CPU all_reduce after the error")
    y = late(3, 1.0)
    dist.all_reduce(y)
    all_equal(y, float(ctx.size), "a CUDA all_reduce after the error")


# --------------------------------------------------------------------------
# ringcc.torch (Horovod's API)


def hvd():
    import ringcc.torch as module

    if not module.is_initialized():
        module.init()
    return module


@CASES.case("hvd/collectives")
def hvd_collectives(ctx):
    h = hvd()
    import ringcc

    n, r = ctx.size, ctx.rank
    x = torch.arange(6.0, device=DEVICE) * (r + 1)
    s = h.allreduce(x, op=h.Sum, name="gpu.sum")
    expect(s.device == DEVICE, f"allreduce result on {s.device}")
    all_equal(s, torch.arange(6.0) * triangle(n), "allreduce Sum")
    y = x.clone()
    h.allreduce_(y, op=h.Average, name="gpu.avg")
    all_equal(y, torch.arange(6.0) * triangle(n) / n, "allreduce_ Average")
    # Enqueued behind slow work, waited for by synchronize(), read on the current stream.
    z = late(1 << 16, r + 1.0)
    handle = h.allreduce_async_(z, op=h.Sum, name="gpu.async")
    h.synchronize(handle)
    all_equal(z * 2, 2.0 * triangle(n), "z * 2 after synchronize()")
    a, b = late(5, 1.0), late((2, 3), r + 1.0)
    ga, gb = h.grouped_allreduce([a, b], op=h.Sum, name="gpu.group")
    all_equal(ga, float(n), "grouped allreduce 0")
    all_equal(gb, float(triangle(n)), "grouped allreduce 1")
    gathered = h.allgather(late((r + 1, 3), float(r)), name="gpu.gather")
    want = torch.cat([torch.full((q + 1, 3), float(q)) for q in range(n)])
    expect(
        gathered.shape == want.shape and gathered.device == DEVICE, f"allgather {gathered.shape} on {gathered.device}"
    )
    all_equal(gathered, want, "allgather ragged")
    bc = late(4, float(r))
    h.broadcast_(bc, root_rank=n - 1, name="gpu.bcast")
    all_equal(bc, float(n - 1), "broadcast_")
    rows = torch.cat([torch.full((q + 1, 2), float(10 * r + q), device=DEVICE) for q in range(n)])
    received, splits = h.alltoall(rows, splits=torch.tensor([q + 1 for q in range(n)]), name="gpu.a2a")
    all_equal(received, torch.cat([torch.full((r + 1, 2), float(10 * q + r)) for q in range(n)]), "alltoall")
    expect(splits.tolist() == [r + 1] * n, f"alltoall received splits {splits.tolist()}")
    rs = h.reducescatter(late((2 * n, 2), float(r + 1)), op=h.Sum, name="gpu.rs")
    expect(tuple(rs.shape) == (2, 2), f"reducescatter shape {tuple(rs.shape)}")
    all_equal(rs, float(triangle(n)), "reducescatter Sum")
    bf = h.allreduce(torch.ones(5, dtype=torch.bfloat16, device=DEVICE), op=h.Sum, name="gpu.bf16")
    all_equal(bf, float(n), "bfloat16")
    i16 = h.allreduce(torch.ones(3, dtype=torch.int16, device=DEVICE), op=h.Sum, name="gpu.int16")
    expect(i16.dtype == torch.int16 and i16.device == DEVICE, f"int16 result {i16.dtype} on {i16.device}")
    all_equal(i16, float(n), "int16 (reduced as int32)")
    # A process set of its own (rank 0 alone): its communicator, on the
    # current stream, in issue order.
    ps = h.add_process_set([0])
    try:
        if r == 0:
            p = h.allreduce(late(4, 3.0), op=h.Sum, process_set=ps)
            all_equal(p + 1, 4.0, "allreduce on a process set")
    finally:
        h.remove_process_set(ps)
    expect(h.cuda_built() is True, "cuda_built() with a GPU")
    expect(h.nccl_built() is bool(ringcc.nccl_info()["found"]), "nccl_built() says whether NCCL was found")


@CASES.case("hvd/distributed-optimizer")
def hvd_optimizer(ctx):
    h = hvd()
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2)).to(DEVICE)
    h.broadcast_parameters(model.state_dict(), root_rank=0)
    reference = copy.deepcopy(model)
    optimizer = h.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        batches = [torch.randn(4, 8, generator=torch.Generator().manual_seed(100 * step + q)) for q in range(ctx.size)]
        optimizer.zero_grad()
        model(batches[ctx.rank].to(DEVICE)).pow(2).mean().backward()
        optimizer.step()
        # The same step on the average of every rank's gradient, computed here.
        ref_optimizer.zero_grad()
        (sum(reference(b.to(DEVICE)).pow(2).mean() for b in batches) / ctx.size).backward()
        ref_optimizer.step()
    torch.cuda.synchronize()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        expect(p.device == DEVICE, f"{name} on {p.device}")
        expect(
            torch.allclose(p, q, rtol=1e-5, atol=1e-6),
            f"{name}: differs from the reference by {(p - q).abs().max().item():.3g}",
        )


def before_init():
    global torch, dist, nn, F, DEVICE
    import torch as _torch
    import torch.distributed as _dist
    import torch.nn as _nn
    import torch.nn.functional as _F

    torch, dist, nn, F = _torch, _dist, _nn, _F
    if not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device")
    DEVICE = torch.device("cuda", 0)
    torch.cuda.set_device(DEVICE)
    os.environ.setdefault("RINGCC_TIMEOUT_S", "60")


if __name__ == "__main__":
    from torch_harness import run_cases

    sys.exit(run_cases(CASES, before_init=before_init))
