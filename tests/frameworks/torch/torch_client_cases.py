"""The libraries people train with, on backend "ring" and on gloo side by side.

    ringrun -np 2 python tests/frameworks/torch/torch_client_cases.py --out DIR [--cases 'fsdp2/*']

Every case runs one client of torch.distributed (FSDP2 and torch.distributed.checkpoint,
DTensor and tensor parallelism, pipelining, ZeroRedundancyOptimizer, DDP's
variants and every built-in comm hook, PyTorch Lightning, Accelerate) twice in the same processes, with the
same seeds and data: once over a "ring" group and once over a gloo group.
The results must be equal: bit for bit on 2 ranks, where the sum of two
numbers has one rounding whatever the order, and within a stated tolerance
on more ranks, where gloo adds in another order. Where it is cheap, a case
also checks the result against the same training done locally.

The cases on torch.distributed's own clients pass a group (or a device mesh
made from one). Lightning and Accelerate use the default group, so their cases
replace it: they destroy every group, let the client (or the case) make a
default group of each backend in turn, and leave a new "ring" default group
behind for the cases after them. They run last for that reason.

tests/frameworks/torch/test_torch_clients.py starts the group and asserts on what the ranks
recorded (torch_harness.run_cases).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch_cases import same  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "harness"))  # tests/harness
from torch_harness import CaseList, Skip, run_cases  # noqa: E402

CASES = CaseList()
BACKENDS = ("ring", "gloo")
GROUP_TIMEOUT = datetime.timedelta(seconds=60)


# --------------------------------------------------------------------------
# Groups of both backends


_groups: dict[str, dist.ProcessGroup] = {}
_store_holder: dict[str, object] = {}
_generation = [0]


def group_of(backend: str) -> dist.ProcessGroup:
    """A group of every rank on `backend`, made once (every rank calls it in the same order)."""
    if backend not in _groups:
        group = dist.new_group(backend=backend, timeout=GROUP_TIMEOUT)
        assert dist.get_backend(group) == backend, dist.get_backend(group)
        _groups[backend] = group
    return _groups[backend]


def harness_store():
    """torch's store of the harness's first default group (kept alive here, so
    that cases that replace the default group can still meet through it)."""
    if "store" not in _store_holder:
        _store_holder["store"] = dist.distributed_c10d._get_default_store()
    return _store_holder["store"]


def tolerance(ctx) -> dict:
    """Two ranks add in one order only; more ranks round differently on gloo."""
    return {} if ctx.size <= 2 else dict(rtol=1e-5, atol=1e-6)


def compare_backends(ctx, results: dict[str, list[torch.Tensor]], what: str, **tol) -> None:
    tol = tol or tolerance(ctx)
    ring, gloo = results["ring"], results["gloo"]
    assert len(ring) == len(gloo), f"{what}: {len(ring)} tensors on ring, {len(gloo)} on gloo"
    for index, (a, b) in enumerate(zip(ring, gloo)):
        same(a, b, f"{what} [{index}]: ring vs gloo", **tol)


def replace_default_group(ctx, backend: str | None) -> None:
    """Destroys every group; with a backend, makes a new default group of it
    through the harness's store (a fresh prefix each time)."""
    store = harness_store()
    _groups.clear()
    if dist.is_initialized():
        dist.destroy_process_group()
    if backend is not None:
        _generation[0] += 1
        prefix = dist.PrefixStore(f"client-default/{_generation[0]}", store)
        dist.init_process_group(backend, store=prefix, rank=ctx.rank, world_size=ctx.size, timeout=GROUP_TIMEOUT)


@contextlib.contextmanager
def default_group_replaced(ctx):
    """Inside: the case makes the default groups it needs. After: a "ring"
    default group again, whatever happened inside."""
    harness_store()
    try:
        yield
    finally:
        replace_default_group(ctx, "ring")


def shared_port(ctx, key: str) -> int:
    """A free port chosen by rank 0 and read by every rank from the harness's store."""
    store = harness_store()
    if ctx.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        store.set(key, str(port))
    return int(store.get(key).decode())


def shared_directory(ctx, key: str) -> str:
    """A directory made by rank 0 for this case, its path read by every rank."""
    store = harness_store()
    if ctx.rank == 0:
        path = tempfile.mkdtemp(prefix="ringcc-client-")
        store.set(key, path)
    return store.get(key).decode()


def need_module(name: str, package: str) -> None:
    if importlib.util.find_spec(name) is None:
        raise Skip(f"{package} is not installed (pip install {package})")


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def mlp(seed: int, width: int = 32, dims=(16, 4)) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(dims[0], width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, dims[1]),
    )


def batches(ctx, steps: int, rank: int | None = None, rows: int = 8, dims=(16, 4), salt: int = 0):
    g = ctx.generator(rank, salt)
    return [(torch.randn(rows, dims[0], generator=g), torch.randn(rows, dims[1], generator=g)) for _ in range(steps)]


def mesh_of(group: dist.ProcessGroup):
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(group, "cpu")


# --------------------------------------------------------------------------
# FSDP2 (fully_shard) and torch.distributed.checkpoint


def _fsdp2_model(mesh, seed: int, policy=None, reshard_after_forward=True):
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        raise Skip("this torch has no torch.distributed.fsdp.fully_shard (public from torch 2.6)") from None

    model = mlp(seed)
    options = dict(mesh=mesh, reshard_after_forward=reshard_after_forward)
    if policy is not None:
        options["mp_policy"] = MixedPrecisionPolicy(**policy)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, **options)
    fully_shard(model, **options)
    return model


def _full_parameters(model) -> list[torch.Tensor]:
    return [p.full_tensor().detach().clone() for p in model.parameters()]


def _fsdp2_train(ctx, group, policy=None, accumulate=2, steps=3, reshard_after_forward=True, adam=True):
    """`steps` optimizer steps, each over `accumulate` micro-batches; the
    gradients are reduced on the last one only (set_requires_gradient_sync)."""
    model = _fsdp2_model(mesh_of(group), 11, policy, reshard_after_forward)
    if adam:
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = batches(ctx, steps * accumulate)
    losses = []
    for step in range(steps):
        for micro in range(accumulate):
            x, y = data[step * accumulate + micro]
            model.set_requires_gradient_sync(micro == accumulate - 1)
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
            loss.backward()
            losses.append(loss.detach().reshape(1))
        opt.step()
        opt.zero_grad()
    return model, opt, _full_parameters(model), losses


def _fsdp2_local_reference(ctx, accumulate=2, steps=3) -> list[torch.Tensor]:
    """The same training on one process: every rank's micro-batches, averaged."""
    model = mlp(11)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    data = [batches(ctx, steps * accumulate, rank=r) for r in range(ctx.size)]
    for step in range(steps):
        for micro in range(accumulate):
            index = step * accumulate + micro
            for r in range(ctx.size):
                x, y = data[r][index]
                (torch.nn.functional.mse_loss(model(x), y) / ctx.size).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


@CASES.case("fsdp2/fully_shard-fp32-no-sync-as-gloo-and-local")
def _fsdp2_fp32(ctx):
    results = {b: _fsdp2_train(ctx, group_of(b))[2] for b in BACKENDS}
    compare_backends(ctx, results, "FSDP2 parameters after training")
    reference = _fsdp2_local_reference(ctx)
    for index, (got, want) in enumerate(zip(results["ring"], reference)):
        same(got, want, f"FSDP2 on ring vs local training, parameter {index}", rtol=1e-4, atol=1e-5)


@CASES.case("fsdp2/fully_shard-bf16-params-and-reduce-as-gloo")
def _fsdp2_bf16(ctx):
    # bf16 parameters in forward and backward, gradients reduced in bf16 and in
    # float32; reshard_after_forward=False keeps the unsharded parameters for
    # backward. SGD, so that a gradient's rounding moves a parameter in
    # proportion (Adam's step is about lr whatever the gradient's size).
    for reduce_dtype in (torch.bfloat16, torch.float32):
        policy = dict(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
        runs = {b: _fsdp2_train(ctx, group_of(b), policy, reshard_after_forward=False, adam=False) for b in BACKENDS}
        # More than 2 ranks: the backends add three or more bf16 numbers in
        # different orders, rounding at different steps.
        tol = tolerance(ctx) if reduce_dtype == torch.float32 or ctx.size <= 2 else dict(rtol=1e-2, atol=1e-3)
        what = f"FSDP2 bf16 (reduce {reduce_dtype})"
        compare_backends(ctx, {b: runs[b][2] for b in BACKENDS}, f"{what} parameters", **tol)
        compare_backends(ctx, {b: runs[b][3] for b in BACKENDS}, f"{what} losses", **tol)


@CASES.case("fsdp2/dcp-save-load-round-trip")
def _fsdp2_dcp(ctx):
    """An FSDP2 model and its optimizer saved with torch.distributed.checkpoint
    over one backend and loaded into a fresh model over either: same
    parameters and optimizer state, and the next step matches."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    root = shared_directory(ctx, f"{ctx.case}/dir")
    try:
        saved = {}
        for backend in BACKENDS:
            group = group_of(backend)
            model, opt, params, _ = _fsdp2_train(ctx, group, steps=2)
            model_sd, opt_sd = get_state_dict(model, opt)
            dcp.save(
                {"model": model_sd, "optim": opt_sd}, checkpoint_id=os.path.join(root, backend), process_group=group
            )
            x, y = batches(ctx, 1, salt=5)[0]
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            saved[backend] = (params, _full_parameters(model))
        compare_backends(ctx, {b: saved[b][0] for b in BACKENDS}, "parameters at the checkpoint")
        # Each checkpoint loaded over each backend.
        for written in BACKENDS:
            for reader in BACKENDS:
                group = group_of(reader)
                model = _fsdp2_model(mesh_of(group), 99)
                opt = torch.optim.AdamW(model.parameters(), lr=0.01)
                model_sd, opt_sd = get_state_dict(model, opt)
                state = {"model": model_sd, "optim": opt_sd}
                dcp.load(state, checkpoint_id=os.path.join(root, written), process_group=group)
                set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
                what = f"checkpoint written over {written}, read over {reader}"
                for index, (got, want) in enumerate(zip(_full_parameters(model), saved[written][0])):
                    same(got, want, f"{what}: parameter {index}")
                x, y = batches(ctx, 1, salt=5)[0]
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                for index, (got, want) in enumerate(zip(_full_parameters(model), saved[written][1])):
                    same(got, want, f"{what}: parameter {index} after one more step", **tolerance(ctx))
    finally:
        dist.barrier(group=group_of("ring"))
        if ctx.rank == 0:
            shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------
# DTensor and tensor parallelism


def _redistributions(ctx, group) -> list[torch.Tensor]:
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = mesh_of(group)
    n = ctx.size
    # Rows that do not divide evenly among the ranks: uneven shards.
    full = torch.arange(float((2 * n + 1) * 6)).reshape(2 * n + 1, 6)
    out = []
    shard0 = distribute_tensor(full, mesh, [Shard(0)])
    out.append(shard0.to_local().clone())
    steps = [
        ("Shard(0)->Replicate", [Replicate()]),
        ("Replicate->Shard(1)", [Shard(1)]),
        ("Shard(1)->Shard(0)", [Shard(0)]),
        ("Shard(0)->Replicate again", [Replicate()]),
    ]
    current = shard0
    for what, placements in steps:
        current = current.redistribute(mesh, placements)
        if isinstance(placements[0], Replicate):
            same(current.to_local(), full, f"DTensor {what}")
        out.append(current.to_local().clone())
    # Partial: each rank holds a different addend.
    addends = [torch.randint(-5, 6, (2 * n + 1, 6), generator=ctx.generator(r, 3)).float() for r in range(n)]
    total = torch.stack(addends).sum(0)
    for target, what in (
        (Replicate(), "Partial->Replicate"),
        (Shard(0), "Partial->Shard(0)"),
        (Shard(1), "Partial->Shard(1)"),
    ):
        partial = DTensor.from_local(addends[ctx.rank], mesh, [Partial()], run_check=False)
        moved = partial.redistribute(mesh, [target])
        same(moved.full_tensor(), total, f"DTensor {what}")
        out.append(moved.to_local().clone())
    # A Partial of "max" and "avg".
    for op in ("max", "avg"):
        partial = DTensor.from_local(addends[ctx.rank], mesh, [Partial(op)], run_check=False)
        reduced = partial.redistribute(mesh, [Replicate()]).to_local()
        want = torch.stack(addends).amax(0) if op == "max" else total / n
        same(reduced, want, f"DTensor Partial({op!r})->Replicate", **({} if op == "max" else dict(rtol=1e-6, atol=0)))
        out.append(reduced.clone())
    return out


@CASES.case("dtensor/redistribute-shard-replicate-partial", min_size=2)
def _dtensor_redistribute(ctx):
    results = {b: _redistributions(ctx, group_of(b)) for b in BACKENDS}
    compare_backends(ctx, results, "DTensor redistributions")


class _FeedForward(torch.nn.Module):
    def __init__(self, seed: int, hidden: int):
        super().__init__()
        torch.manual_seed(seed)
        self.up = torch.nn.Linear(16, hidden)
        self.down = torch.nn.Linear(hidden, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def _tensor_parallel(ctx, group, steps=3):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = mesh_of(group)
    # The hidden width divides among the ranks (DTensor's matmul needs even shards there).
    model = parallelize_module(
        _FeedForward(21, 8 * ctx.size), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()}
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # Tensor parallelism: every rank sees the same batch.
    data = batches(ctx, steps, rank=0, dims=(16, 16), salt=9)
    outputs = []
    for x, y in data:
        out = model(x)
        outputs.append(out.detach().clone())
        torch.nn.functional.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()
    return [p.full_tensor().detach().clone() for p in model.parameters()] + outputs


@CASES.case("dtensor/tensor-parallel-colwise-rowwise", min_size=2)
def _dtensor_tp(ctx):
    results = {b: _tensor_parallel(ctx, group_of(b)) for b in BACKENDS}
    compare_backends(ctx, results, "tensor-parallel parameters and outputs")
    model = _FeedForward(21, 8 * ctx.size)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches(ctx, 3, rank=0, dims=(16, 16), salt=9):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    for index, (got, want) in enumerate(zip(results["ring"], [p.detach() for p in model.parameters()])):
        same(got, want, f"tensor parallel on ring vs local training, parameter {index}", rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------
# torch.distributed.pipelining


def _pipeline_blocks(size: int) -> list[torch.nn.Module]:
    torch.manual_seed(31)
    return [torch.nn.Sequential(torch.nn.Linear(12, 12), torch.nn.Tanh()) for _ in range(size)]


def _pipeline(ctx, group, schedule_name: str, steps=2, microbatches=4):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    schedule_class = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}[schedule_name]
    block = _pipeline_blocks(ctx.size)[ctx.rank]
    stage = PipelineStage(block, ctx.rank, ctx.size, torch.device("cpu"), group=group)
    schedule = schedule_class(stage, n_microbatches=microbatches, loss_fn=torch.nn.functional.mse_loss)
    opt = torch.optim.SGD(block.parameters(), lr=0.1)
    data = batches(ctx, steps, rank=0, rows=8, dims=(12, 12), salt=13)
    losses = []
    first, last = ctx.rank == 0, ctx.rank == ctx.size - 1
    for x, y in data:
        opt.zero_grad()
        step_losses: list[torch.Tensor] = []
        if first and last:
            schedule.step(x, target=y, losses=step_losses)
        elif first:
            schedule.step(x)
        elif last:
            schedule.step(target=y, losses=step_losses)
        else:
            schedule.step()
        opt.step()
        losses += [loss.detach().reshape(1) for loss in step_losses]
    return [p.detach().clone() for p in block.parameters()] + losses


def _pipeline_local_reference(ctx, steps=2, microbatches=4) -> list[torch.Tensor]:
    """This rank's block after the same training on one process (microbatch
    losses are averaged by the schedule, so the batch loss here is their mean)."""
    model = torch.nn.Sequential(*_pipeline_blocks(ctx.size))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches(ctx, steps, rank=0, rows=8, dims=(12, 12), salt=13):
        opt.zero_grad()
        loss = sum(
            torch.nn.functional.mse_loss(model(xm), ym) for xm, ym in zip(x.chunk(microbatches), y.chunk(microbatches))
        )
        (loss / microbatches).backward()
        opt.step()
    return [p.detach().clone() for p in model[ctx.rank].parameters()]


@CASES.case("pipelining/gpipe-and-1f1b", min_size=2)
def _pipelining(ctx):
    reference = _pipeline_local_reference(ctx)
    for schedule in ("GPipe", "1F1B"):
        results = {b: _pipeline(ctx, group_of(b), schedule) for b in BACKENDS}
        # Point-to-point only: no reduction, so equal bit for bit on any number of ranks.
        compare_backends(ctx, results, f"{schedule} stage parameters and losses", rtol=0, atol=0)
        for index, want in enumerate(reference):
            same(
                results["ring"][index],
                want,
                f"{schedule} on ring vs local training, parameter {index}",
                rtol=1e-5,
                atol=1e-6,
            )


# --------------------------------------------------------------------------
# ZeroRedundancyOptimizer


def _zero_train(ctx, group, steps=4, overlap=False):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = mlp(41)
    # Small buckets: several buckets, so that overlap_with_ddp assigns them to different ranks.
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.002)
    zero = ZeroRedundancyOptimizer(
        ddp.parameters(),
        optimizer_class=torch.optim.Adam,
        process_group=group,
        overlap_with_ddp=overlap,
        lr=0.01,
    )
    if overlap:
        from torch.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        ddp.register_comm_hook(group, hook_with_zero_step(allreduce_hook, ddp, zero))
    data = batches(ctx, steps, salt=17)
    # With overlap_with_ddp the optimizer steps from the hook, and only once
    # DDP's buckets are final: the first two iterations update nothing.
    warmup = [batches(ctx, 1, salt=18)[0]] * 2 if overlap else []
    before = flat(model.parameters())
    for index, (x, y) in enumerate(warmup + data):
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        if not overlap:
            zero.step()
        zero.zero_grad()
        if overlap and index == len(warmup) - 1:
            same(flat(model.parameters()), before, "parameters after the warm-up of overlap_with_ddp")
    if overlap:
        # The local optimizer is a functional one there, without a state_dict.
        return [p.detach().clone() for p in model.parameters()], None
    zero.consolidate_state_dict(to=0)
    state = zero.state_dict() if ctx.rank == 0 else None
    steps_in_state = None if state is None else sorted({int(s["step"]) for s in state["state"].values()})
    return [p.detach().clone() for p in model.parameters()], steps_in_state


@CASES.case("zero/zero-redundancy-optimizer-as-gloo-and-overlap_with_ddp", min_size=2)
def _zero(ctx):
    runs = {b: _zero_train(ctx, group_of(b)) for b in BACKENDS}
    compare_backends(ctx, {b: runs[b][0] for b in BACKENDS}, "ZeRO (Adam) parameters")
    if ctx.rank == 0:
        assert runs["ring"][1] == runs["gloo"][1] == [4], runs["ring"][1]
    # gloo refuses overlap_with_ddp (torch raises "Gloo backend using Overlapping
    # DDP with ZeRO may meet hangs"); ring runs it, and must match plain ZeRO.
    overlapped, _ = _zero_train(ctx, group_of("ring"), overlap=True)
    compare_backends(ctx, {"ring": overlapped, "gloo": runs["gloo"][0]}, "ZeRO overlap_with_ddp on ring vs plain ZeRO")


# --------------------------------------------------------------------------
# DDP variants


class _Branchy(torch.nn.Module):
    """A model whose second branch is used on odd steps only."""

    def __init__(self, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.trunk = torch.nn.Linear(16, 32)
        self.odd = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x, use_odd: bool):
        h = torch.relu(self.trunk(x))
        if use_odd:
            h = torch.relu(self.odd(h))
        return self.head(h)


def _ddp_variant(ctx, group, variant: str, steps=4):
    options = dict(process_group=group, bucket_cap_mb=0.002)
    if variant == "static_graph":
        model = mlp(51)
        options.update(static_graph=True)
    elif variant == "find_unused_parameters":
        model = _Branchy(52)
        options.update(find_unused_parameters=True)
    elif variant == "gradient_as_bucket_view":
        model = mlp(53)
        options.update(gradient_as_bucket_view=True)
    else:  # no_sync: two micro-batches per step, the first without a reduction
        model = mlp(54)
    ddp = torch.nn.parallel.DistributedDataParallel(model, **options)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = batches(ctx, 2 * steps, salt=23)
    for step in range(steps):
        opt.zero_grad()
        if variant == "find_unused_parameters":
            x, y = data[step]
            torch.nn.functional.mse_loss(ddp(x, step % 2 == 1), y).backward()
        elif variant == "no_sync":
            with ddp.no_sync():
                x, y = data[2 * step]
                torch.nn.functional.mse_loss(ddp(x), y).backward()
            x, y = data[2 * step + 1]
            torch.nn.functional.mse_loss(ddp(x), y).backward()
        else:
            x, y = data[step]
            torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@CASES.case("ddp/static-graph-unused-parameters-bucket-view-no_sync", min_size=2)
def _ddp_variants(ctx):
    for variant in ("static_graph", "find_unused_parameters", "gradient_as_bucket_view", "no_sync"):
        results = {b: _ddp_variant(ctx, group_of(b), variant) for b in BACKENDS}
        compare_backends(ctx, results, f"DDP {variant} parameters")
        everywhere = [torch.empty_like(flat(results["ring"])) for _ in range(ctx.size)]
        dist.all_gather(everywhere, flat(results["ring"]), group=group_of("ring"))
        for r in range(ctx.size):
            same(everywhere[r], everywhere[0], f"DDP {variant}: parameters of rank {r} vs rank 0")


def _hooked_ddp(ctx, group, hook=None, state=None, steps=4, one_bucket=False, averager=None, fused=False):
    """Four SGD steps (momentum) of DDP with `hook` registered (state: `state`,
    else the group); the parameters, and every rank's gradients of the last step."""
    model = mlp(56)
    # Several buckets, except for hooks whose callbacks issue collectives:
    # another bucket's hook could then issue its own between them on one
    # rank and not on another, with any backend (docs/torch.md).
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, process_group=group, bucket_cap_mb=25 if one_bucket else 0.002
    )
    if fused:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript's functional optimizers
            ddp._register_fused_optim(torch.optim.SGD, lr=0.05, momentum=0.9)
        opt = None
    else:
        if hook is not None:
            ddp.register_comm_hook(group if state is None else state, hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches(ctx, steps, salt=29):
        if opt is not None:
            opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        if opt is not None:
            opt.step()
        if averager is not None:
            averager.average_parameters(ddp.parameters())
    return [p.detach().clone() for p in model.parameters()]


def _comm_hooks(group, subgroup):
    """Every built-in comm hook of torch.distributed.algorithms.ddp_comm_hooks:
    name -> (hook, state or None, one bucket, model averager, fused optimizer)."""
    from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks as debugging
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as default
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as local_sgd
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks as quantization
    from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager

    # DDP refuses the bf16 hooks by name without CUDA and NCCL 2.10+; on the
    # CPU they run under another name.
    def bf16_compress(state, bucket):
        return default.bf16_compress_hook(state, bucket)

    bf16_wrapper = default.bf16_compress_wrapper(default.allreduce_hook)

    def bf16_compress_wrapped_allreduce(state, bucket):
        return bf16_wrapper(state, bucket)

    def power(rank: int):
        # From the second step on (torch's default is the 1000th).
        return powersgd.PowerSGDState(
            process_group=group, matrix_approximation_rank=rank, start_powerSGD_iter=2, min_compression_rate=0.5
        )

    return {
        "allreduce_hook": (default.allreduce_hook, None, False, None, False),
        "fp16_compress_hook": (default.fp16_compress_hook, None, False, None, False),
        "bf16_compress_hook": (bf16_compress, None, False, None, False),
        "fp16_compress_wrapper(allreduce_hook)": (
            default.fp16_compress_wrapper(default.allreduce_hook),
            None,
            False,
            None,
            False,
        ),
        "bf16_compress_wrapper(allreduce_hook)": (bf16_compress_wrapped_allreduce, None, False, None, False),
        "quantization_pertensor_hook": (quantization.quantization_pertensor_hook, None, True, None, False),
        "quantization_perchannel_hook": (quantization.quantization_perchannel_hook, None, True, None, False),
        "powerSGD_hook rank 1": (powersgd.powerSGD_hook, power(1), True, None, False),
        "powerSGD_hook rank 2": (powersgd.powerSGD_hook, power(2), True, None, False),
        "batched_powerSGD_hook rank 1": (powersgd.batched_powerSGD_hook, power(1), True, None, False),
        "batched_powerSGD_hook rank 2": (powersgd.batched_powerSGD_hook, power(2), True, None, False),
        "noop_hook": (debugging.noop_hook, None, False, None, False),
        # Post-local SGD: global allreduces for two steps, then allreduces in a
        # subgroup, the whole group averaging the parameters every second step.
        "post_localSGD_hook + PeriodicModelAverager": (
            local_sgd.post_localSGD_hook,
            local_sgd.PostLocalSGDState(process_group=group, subgroup=subgroup, start_localSGD_iter=2),
            False,
            PeriodicModelAverager(period=2, warmup_steps=2, process_group=group),
            False,
        ),
        # optimizer_overlap_hooks: the optimizer steps from DDP's allreduce hook.
        "_register_fused_optim (allreduce hook then SGD)": (None, None, False, None, True),
    }


# The members of DDPCommHookType and the entries above that run them.
HOOK_TYPES = {
    "ALLREDUCE": "allreduce_hook",
    "FP16_COMPRESS": "fp16_compress_hook",
    "BF16_COMPRESS": "bf16_compress_hook",
    "QUANTIZE_PER_TENSOR": "quantization_pertensor_hook",
    "QUANTIZE_PER_CHANNEL": "quantization_perchannel_hook",
    "POWER_SGD": "powerSGD_hook rank 1",
    "POWER_SGD_RANK2": "powerSGD_hook rank 2",
    "BATCHED_POWER_SGD": "batched_powerSGD_hook rank 1",
    "BATCHED_POWER_SGD_RANK2": "batched_powerSGD_hook rank 2",
    "NOOP": "noop_hook",
}


def _subgroup(ctx, backend: str) -> dist.ProcessGroup:
    """This rank's half of the ranks (the first half gets the odd one):
    one rank each on 2 ranks, {0, 1} and {2} on 3."""
    half = (ctx.size + 1) // 2
    halves = [list(range(half)), list(range(half, ctx.size))]
    key = f"half/{backend}"
    if key not in _groups:
        _groups[key], _ = dist.new_subgroups_by_enumeration(halves, timeout=GROUP_TIMEOUT, backend=backend)
    return _groups[key]


def _innermost_error(error: BaseException) -> str:
    """The error a hook's callback raised, without torch's wrapping ("Got
    the following error when running the callback: ...") and the traceback
    it appends, which name this backend's files."""
    first = (str(error).splitlines() or [""])[0]
    return (
        first.split("running the callback: ")[-1]
        if "running the callback: " in first
        else f"{type(error).__name__}: {first}"
    )


@CASES.case("ddp/every-built-in-comm-hook-as-gloo", min_size=2)
def _ddp_comm_hooks(ctx):
    from torch.distributed.algorithms.ddp_comm_hooks import DDPCommHookType

    missing = sorted(set(DDPCommHookType.__members__) - set(HOOK_TYPES))
    assert not missing, f"DDPCommHookType has hooks this case does not run: {missing}"
    hooks = {b: _comm_hooks(group_of(b), _subgroup(ctx, b)) for b in BACKENDS}
    exact = {"quantization_pertensor_hook", "quantization_perchannel_hook", "noop_hook"}
    for name in hooks["ring"]:
        results = {}
        for backend in BACKENDS:
            hook, state, one_bucket, averager, fused = hooks[backend][name]
            try:
                results[backend] = _hooked_ddp(
                    ctx, group_of(backend), hook, state, one_bucket=one_bucket, averager=averager, fused=fused
                )
            except (AssertionError, RuntimeError) as error:
                # Some hooks fail in torch 2.13 on the CPU whatever the
                # backend: batched_powerSGD_hook its own shape check
                # (_orthogonalize of a 2-D matrix), the quantization hooks
                # indexing all_gather's future value as NCCL's. "ring" must
                # then fail as gloo does.
                results[backend] = _innermost_error(error)
            if "powerSGD" in name and not isinstance(results[backend], str):
                assert state.p_memory_dict, f"{name} on {backend} never compressed"
        if isinstance(results["ring"], str) or isinstance(results["gloo"], str):
            ring, gloo = results["ring"], results["gloo"]
            assert ring == gloo, f"{name}: ring gave {ring!r}, gloo {gloo!r}"
            ctx.note(f"{name}: fails on both backends: {results['ring'][:120]}")
            continue
        if name in exact:
            # Gathered and added up locally in rank order (or not communicated): any size.
            tol = dict(rtol=0, atol=0)
        elif ctx.size <= 2:
            tol = {}
        elif "compress" in name:
            tol = dict(rtol=1e-3, atol=1e-4)  # fp16 and bf16 sums of three numbers
        elif "powerSGD" in name:
            tol = dict(rtol=1e-4, atol=1e-5)  # the orthogonalisation carries float rounding on
        else:
            tol = tolerance(ctx)
        compare_backends(ctx, results, f"DDP with {name}: parameters", **tol)


# --------------------------------------------------------------------------
# PyTorch Lightning (DDPStrategy) and Accelerate: they use the default group.


def _lightning():
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl
        except ImportError:
            raise Skip("PyTorch Lightning is not installed (pip install lightning)") from None
    return pl


def _lightning_fit(ctx, pl, backend: str, steps: int) -> list[torch.Tensor]:
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp(61)

        def training_step(self, batch, _index):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    # Every rank builds the same data set; Lightning's DistributedSampler gives each rank its share.
    g = torch.Generator().manual_seed(71)
    dataset = TensorDataset(
        torch.randn(8 * ctx.size * steps, 16, generator=g), torch.randn(8 * ctx.size * steps, 4, generator=g)
    )
    loader = DataLoader(dataset, batch_size=8)
    # Lightning makes the default group itself (env://): a port of its own each time.
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(shared_port(ctx, f"{ctx.case}/{backend}/port"))
    strategy = pl.strategies.DDPStrategy(process_group_backend=backend, timeout=GROUP_TIMEOUT)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=ctx.size,
        num_nodes=1,
        strategy=strategy,
        max_steps=steps,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tempfile.gettempdir(),
    )
    module = Tiny()
    trainer.fit(module, loader)
    assert dist.is_initialized() and dist.get_backend() == backend, dist.get_backend()
    assert trainer.global_step == steps, trainer.global_step
    return [p.detach().clone() for p in module.parameters()]


@CASES.case("lightning/ddp-strategy-fit", min_size=2)
def _lightning_ddp(ctx):
    pl = _lightning()
    keys = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")
    saved = {k: os.environ.get(k) for k in keys}
    # Under torchrun, rank 0 serves a store of its own on the new port rather
    # than looking for torchrun's agent's there.
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    results = {}
    with default_group_replaced(ctx), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging
        try:
            for backend in BACKENDS:
                replace_default_group(ctx, None)
                results[backend] = _lightning_fit(ctx, pl, backend, steps=4)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    compare_backends(ctx, results, "Lightning DDPStrategy parameters after fit")


def _accelerate_loop(ctx, backend: str, steps: int) -> list[torch.Tensor]:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from torch.utils.data import DataLoader, TensorDataset

    # Accelerate maps a CPU job to gloo (or mpi); a default group that
    # exists already is the one it uses.
    replace_default_group(ctx, backend)
    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == ctx.size and accelerator.process_index == ctx.rank
    g = torch.Generator().manual_seed(81)
    dataset = TensorDataset(
        torch.randn(8 * ctx.size * steps, 16, generator=g), torch.randn(8 * ctx.size * steps, 4, generator=g)
    )
    model = mlp(82)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model, opt, loader = accelerator.prepare(model, opt, DataLoader(dataset, batch_size=8))
    losses = []
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        losses.append(accelerator.gather(loss.detach().reshape(1)))
    assert dist.get_backend() == backend, dist.get_backend()
    params = [p.detach().clone() for p in accelerator.unwrap_model(model).parameters()]
    AcceleratorState._reset_state(reset_partial_state=True)
    return params + losses


@CASES.case("accelerate/training-loop", min_size=2)
def _accelerate(ctx):
    need_module("accelerate", "accelerate")
    results = {}
    with default_group_replaced(ctx), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for backend in BACKENDS:
            results[backend] = _accelerate_loop(ctx, backend, steps=4)
    compare_backends(ctx, results, "Accelerate parameters and gathered losses")


def main():
    return run_cases(CASES)


if __name__ == "__main__":
    sys.exit(main())
