"""`import ringcc.torch as hvd`: Horovod's torch API, under ringrun and torchrun.

Each group in GROUPS starts once (tests/frameworks/torch/torch_hvd_cases.py) and runs every
case that suits its size (or those its patterns name); each test below
asserts on what the ranks recorded for one case in one group. Separate short runs check a dead peer
(tests/frameworks/torch/torch_hvd_deadpeer.py) under both launchers, and the Horovod recipe of
examples/pytorch_mnist_style.py: as shipped under ringrun, and as a Horovod
user has it (`import horovod.torch as hvd`, the only difference, served by a
two-line `horovod` stand-in package) under torchrun with fp16 compression;
both against the same training replayed in this process.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rank_groups import (  # noqa: E402
    HARD_TIMEOUT_MARGIN_S,
    GroupRun,
    launch_ranks,
    rank_environment,
    run_case_group,
    run_command,
)
from torch_hvd_cases import CASES  # noqa: E402

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[2] / "examples" / "pytorch_mnist_style.py"
GROUP_TIMEOUT_S = 150
GROUP_ENV = {"RINGCC_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Group:
    launcher: str  # "ringrun" or "torchrun"
    size: int
    env: tuple[tuple[str, str], ...] = ()  # set in the ranks besides GROUP_ENV
    cases: str = ""  # the cases whose names match these patterns (comma-separated); all when empty

    def selected(self):
        return CASES.select(self.size, (), [p for p in self.cases.split(",") if p])


NO_CACHE = (("RINGCC_CACHE_CAPACITY", "0"),)
GROUPS: dict[str, Group] = {
    "ringrun-2": Group("ringrun", 2),
    "torchrun-3": Group("torchrun", 3),
    "ringrun-4": Group("ringrun", 4),
    # join with the response cache off: every name announced in full.
    "ringrun-2-nocache": Group("ringrun", 2, NO_CACHE, "join/*"),
    "ringrun-3-nocache": Group("ringrun", 3, NO_CACHE, "join/*"),
}


def launch(launcher: str, size: int, script, args, timeout: float = GROUP_TIMEOUT_S, env=None):
    return launch_ranks(launcher, size, [str(script), *args], timeout, env or rank_environment(GROUP_ENV))


_runs: dict[str, GroupRun] = {}


def group_run(tmp_path_factory, name: str) -> GroupRun:
    if name not in _runs:
        spec = GROUPS[name]
        out = tmp_path_factory.mktemp(f"hvd-{name}")
        env = rank_environment({**GROUP_ENV, **dict(spec.env)})
        script = HERE / "torch_hvd_cases.py"
        _runs[name] = run_case_group(
            name, spec.launcher, spec.size, script, ["--cases", spec.cases], out, GROUP_TIMEOUT_S, env
        )
    return _runs[name]


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}") for name, spec in GROUPS.items() for case in spec.selected()
]


@pytest.mark.parametrize("group_name,case_name", CASE_PARAMS)
def test_case(tmp_path_factory, group_name, case_name):
    group_run(tmp_path_factory, group_name).assert_case(case_name)


@pytest.mark.parametrize("group_name", list(GROUPS))
def test_group_finished_cleanly(tmp_path_factory, group_name):
    """Every rank ran every case, under the launcher asked for."""
    run = group_run(tmp_path_factory, group_name)
    run.assert_clean_exit()
    spec = GROUPS[group_name]
    assert run.completed.returncode == 0, run.completed.describe()
    for rank in range(spec.size):
        start = run.start_record(rank)
        assert start["size"] == spec.size
        assert start["cases"] == len(spec.selected())


@pytest.mark.parametrize("launcher", ["ringrun", "torchrun"])
def test_dead_peer_raises_from_synchronize(tmp_path, launcher):
    """The last rank exits while the others wait on an allreduce: their
    synchronize() raises HorovodInternalError (also a PeerFailureError)
    naming it, quickly; later calls and an optimizer step raise too."""
    size = 3
    completed = launch(launcher, size, HERE / "torch_hvd_deadpeer.py", ["--out", str(tmp_path)], 60)
    for rank in range(size - 1):
        path = tmp_path / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote nothing\n{completed.describe()}"
        record = json.loads(path.read_text())
        inflight = record["inflight"]
        assert inflight["raised"] == "PeerFailureError", record
        assert "HorovodInternalError" in inflight["bases"] and "RuntimeError" in inflight["bases"], record
        assert "DistBackendError" in inflight["bases"], record
        assert f"rank {size - 1}" in inflight["message"], record
        assert inflight["seconds"] < 15, record
        for key in ("synchronize", "blocking", "synchronize_inplace", "optimizer_step"):
            assert "HorovodInternalError" in record[key]["bases"], (key, record)
            assert "DistBackendError" in record[key]["bases"], (key, record)
            assert record[key]["seconds"] < 15, (key, record)


DEADLOCK_TIMEOUT_S = 3


def test_unnamed_ops_on_opposite_sides_of_a_barrier_fail_as_a_deadlock(tmp_path):
    """Rank 0 issues an unnamed allreduce before hvd.barrier(), rank 1 after it: their
    automatic names differ and both block for good. With the stall shutdown time at its
    default (600 s), both raise TimeoutError (a HorovodInternalError) after RINGCC_TIMEOUT_S,
    naming each rank's pending names as automatic ones; named calls work afterwards."""
    size = 2
    env = rank_environment({**GROUP_ENV, "RINGCC_TIMEOUT_S": str(DEADLOCK_TIMEOUT_S)})
    completed = launch("ringrun", size, HERE / "torch_hvd_deadlock.py", ["--out", str(tmp_path)], 60, env)
    assert completed.returncode == 0, completed.describe()
    for rank in range(size):
        path = tmp_path / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} wrote nothing\n{completed.describe()}"
        record = json.loads(path.read_text())
        example = record["example"]
        assert example["raised"] == "TimeoutError", record
        assert "HorovodInternalError" in example["bases"], record
        message = example["message"]
        assert message.startswith("deadlock: every rank waits for named collectives"), message
        assert "rank 0: 'allreduce.noname.0' (enqueued on rank 0 only), 'barrier.noname.1'" in message, message
        assert "rank 1: 'barrier.noname.0' (enqueued on rank 1 only)" in message, message
        assert "automatic names of unnamed ops" in message, message
        assert "ranks issued a different number of unnamed ops before this point" in message, message
        assert DEADLOCK_TIMEOUT_S - 0.5 <= example["seconds"] <= DEADLOCK_TIMEOUT_S + 3, example
        assert record["after"] == {"raised": None, "result": "[3.0, 3.0, 3.0]", "seconds": record["after"]["seconds"]}
        assert record["shutdown"]["raised"] is None and record["shutdown"]["seconds"] < 5, record


# --------------------------------------------------------------------------
# The recipe (examples/pytorch_mnist_style.py)

RECIPE_ARGS = ["--epochs", "1", "--samples", "192", "--batch-size", "16", "--seed", "3"]


def _example_module():
    spec = importlib.util.spec_from_file_location("pytorch_mnist_style", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replay(size: int, fp16: bool):
    """The recipe's training for `size` ranks, in this process: every rank's
    batches (from its DistributedSampler), gradients averaged (through
    float16 when `fp16`), SGD with the learning rate times size."""
    ex = _example_module()
    args = ex.parser.parse_args(RECIPE_ARGS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(args.seed)
        dataset = ex.synthetic_mnist(args.samples, args.seed)
        model = ex.Net()
        opt = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=args.momentum)
        samplers = [
            torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=size, rank=r) for r in range(size)
        ]
        for epoch in range(1, args.epochs + 1):
            for s in samplers:
                s.set_epoch(epoch)
            loaders = [torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=s) for s in samplers]
            for batches in zip(*loaders):
                grads = []
                for data, target in batches:
                    model.zero_grad()
                    torch.nn.functional.nll_loss(model(data), target).backward()
                    grads.append([p.grad.clone() for p in model.parameters()])
                for i, p in enumerate(model.parameters()):
                    parts = [g[i].half().float() if fp16 else g[i] for g in grads]
                    avg = sum(parts) / size
                    p.grad = avg.half().float() if fp16 else avg
                opt.step()
    finally:
        torch.set_num_threads(threads)
    return model.state_dict()


def _check_checkpoint(path: Path, size: int, fp16: bool, completed) -> None:
    assert completed.returncode == 0, completed.describe()
    assert path.exists(), f"rank 0 saved no checkpoint\n{completed.describe()}"
    saved = torch.load(path)
    assert saved["size"] == size
    assert 0.0 <= saved["test_accuracy"] <= 1.0 and saved["test_loss"] > 0
    want = _replay(size, fp16)
    tol = 2e-3 if fp16 else 1e-4
    for key, value in want.items():
        assert torch.allclose(saved["model"][key], value, rtol=tol, atol=tol), (
            f"{key}: max difference {(saved['model'][key] - value).abs().max().item():g}"
        )
    assert "Test set: Average loss" in completed.stdout


def test_recipe_example_under_ringrun(tmp_path):
    """examples/pytorch_mnist_style.py as shipped, 2 ranks under ringrun."""
    checkpoint = tmp_path / "checkpoint.pth"
    completed = launch("ringrun", 2, EXAMPLE, [*RECIPE_ARGS, "--checkpoint", str(checkpoint)], 120)
    _check_checkpoint(checkpoint, 2, False, completed)


def test_recipe_with_horovod_import_under_torchrun(tmp_path):
    """The same script as a Horovod user has it (`import horovod.torch as
    hvd`, nothing else differs) against a stand-in `horovod` package that
    re-exports ringcc.torch; 2 ranks under torchrun, fp16 compression."""
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    imports = [i for i, line in enumerate(lines) if line.rstrip("\n") == "import ringcc.torch as hvd"]
    assert len(imports) == 1, "the example imports ringcc.torch as hvd once"
    assert "ringcc" not in "".join(lines[imports[0] + 1 :]), "the script body mentions ringcc"
    lines[imports[0]] = "import horovod.torch as hvd\n"
    horovod_script = "".join(lines)
    script = tmp_path / "pytorch_mnist.py"
    script.write_text(horovod_script)
    shim = tmp_path / "shim" / "horovod"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("")
    (shim / "torch.py").write_text("from ringcc.torch import *  # noqa: F401,F403\n")
    env = rank_environment(GROUP_ENV)
    env["PYTHONPATH"] = f"{tmp_path / 'shim'}:{env['PYTHONPATH']}"
    checkpoint = tmp_path / "checkpoint.pth"
    completed = launch(
        "torchrun", 2, script, [*RECIPE_ARGS, "--fp16-allreduce", "--checkpoint", str(checkpoint)], 120, env=env
    )
    _check_checkpoint(checkpoint, 2, True, completed)


NEXT_PORT_TAKEN = r"""
import numpy as np
import ringcc
for _ in range(2):  # a second init() in the process meets on a port of its own
    ringcc.init()
    x = np.full(4, ringcc.rank() + 1.0)
    ringcc.allreduce_(x)
    assert (x == 3.0).all(), x
    ringcc.shutdown()
print("rank", __import__("os").environ["RANK"], "ok")
"""


def test_torchrun_with_the_port_after_master_port_taken(tmp_path):
    """Under torchrun ringcc's store does not need MASTER_PORT+1 (often
    taken: ephemeral ports come in sequence): rank 0 publishes a free port
    through torchrun's store."""
    import socket

    script = tmp_path / "next_port_taken.py"
    script.write_text(NEXT_PORT_TAKEN)
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            taken.close()
    else:
        pytest.skip("no two free ports in a row")
    with taken:
        taken.listen(1)
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(port),
            "--max-restarts",
            "0",
            str(script),
        ]
        completed = run_command(command, rank_environment(GROUP_ENV), 90 + HARD_TIMEOUT_MARGIN_S)
    assert completed.returncode == 0, completed.describe()
    assert completed.stdout.count(" ok") == 2, completed.describe()


SINGLE_PROCESS = r"""
import sys
import torch
import ringcc.torch as hvd

# importing starts nothing
assert not hvd.is_initialized() and "torchvision" not in sys.modules

try:
    hvd.rank()
    raise SystemExit("rank() before init() should raise")
except ValueError as error:
    assert isinstance(error, hvd.NotInitializedError), type(error)
try:  # the per-tensor path of DistributedOptimizer's hooks
    hvd.allreduce_async_(torch.ones(2), name="before-init", op=hvd.Sum)
    raise SystemExit("allreduce_async_ before init() should raise")
except hvd.NotInitializedError:
    pass
for cycle in range(2):
    hvd.init()
    assert hvd.is_initialized() and hvd.size() == 1 and hvd.rank() == 0
    x = torch.arange(4.0)
    assert torch.equal(hvd.allreduce(x), x) and torch.equal(hvd.allgather(x), x)
    assert torch.equal(hvd.broadcast(x, 0), x) and torch.equal(hvd.reducescatter(x), x)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), hvd.SyncBatchNorm(3))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    try:
        hvd.add_process_set([0])
        raise SystemExit("a set equal to the global one should be refused")
    except ValueError:
        pass
    assert hvd.join() == 0
    hvd.shutdown()
    assert not hvd.is_initialized()
    try:
        hvd.allreduce(x)
        raise SystemExit("allreduce after shutdown() should raise")
    except hvd.NotInitializedError:
        pass
    try:
        hvd.allreduce_async_(x, name="after-shutdown", op=hvd.Sum)
        raise SystemExit("allreduce_async_ after shutdown() should raise")
    except hvd.NotInitializedError:
        pass
print("single-process OK")
"""


def test_single_process_lifecycle():
    """`import ringcc.torch` starts nothing; a lone process is rank 0 of 1:
    every call works, init/shutdown/init cycles, calls outside init raise
    NotInitializedError (a ValueError)."""
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", SINGLE_PROCESS],
        env=rank_environment(GROUP_ENV),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "single-process OK" in result.stdout


def test_output_rows_slabs_grow_and_are_bounded():
    """_core._OutputRows, the out-of-place direct paths' results: rows come
    one after another from slabs the factory makes, a kind's slabs grow
    from first_rows to max_rows, outputs larger than largest_bytes (and 0-d
    ones) get a tensor of their own, rows not handed out stay under
    held_bytes, and a factory that breaks its contract gets a TypeError."""
    from ringcc import _core
    from ringcc.torch.output_rows import new_rows

    calls = []

    def factory(source, k):
        calls.append(k)
        return new_rows(source, k)

    rows = _core._OutputRows(factory, largest_bytes=64, first_rows=2, max_rows=8, held_bytes=256)
    code = _core.DTYPE_CODES["float32"]
    src = torch.ones(4)
    taken = [rows.take(src, (4,), code, 4) for _ in range(2 + 4 + 8 + 8)]
    assert calls == [2, 4, 8, 8]
    for row, address in taken:
        assert row.shape == (4,) and row.dtype == torch.float32 and row.data_ptr() == address
    assert [a for _, a in taken[2:6]] == [taken[2][1] + 16 * i for i in range(4)], "rows follow one another"
    assert len({a for _, a in taken}) == len(taken), "no row is handed out twice"
    assert rows.held() == (1, 0)
    # Outputs past largest_bytes and 0-d ones: one tensor each, no slab.
    big, _ = rows.take(torch.ones(32), (32,), code, 4)
    scalar, _ = rows.take(torch.ones(()), (), code, 4)
    assert calls[-2:] == [1, 1] and big.shape == (32,) and scalar.shape == ()
    assert rows.held() == (1, 0)
    # A new slab of another kind: 1 row taken, 1 held; past held_bytes
    # (256 bytes) of rows not handed out, the slabs are let go of.
    rows.take(torch.ones(2, 2), (2, 2), code, 4)
    assert rows.held() == (2, 16)
    rows.take(torch.ones(3), (3,), _core.DTYPE_CODES["float64"], 8)
    assert rows.held() == (3, 40)
    for k in range(5, 12):
        rows.take(torch.ones(k), (k,), code, 4)
    kinds, held = rows.held()
    assert held <= 256, (kinds, held)

    def bad(result):
        return _core._OutputRows(lambda source, k: result(k))

    with pytest.raises(TypeError, match="must return \\(rows, address\\)"):
        bad(lambda k: [torch.ones(4)] * k).take(src, (4,), code, 4)
    with pytest.raises(TypeError, match="returned 1 rows, not 8"):
        bad(lambda k: ((torch.ones(4),), 64)).take(src, (4,), code, 4)
    with pytest.raises(TypeError, match="null address"):
        bad(lambda k: ((torch.ones(4),) * k, 0)).take(src, (4,), code, 4)
    with pytest.raises(ZeroDivisionError):
        _core._OutputRows(lambda source, k: 1 / 0).take(src, (4,), code, 4)
    with pytest.raises(ValueError, match="first_rows <= max_rows"):
        _core._OutputRows(factory, first_rows=9, max_rows=8)
    with pytest.raises(TypeError, match="callable"):
        _core._OutputRows(42)
