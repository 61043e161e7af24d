"""torchrun's restarts over backend "ring": a rank killed mid-training makes
torchrun restart the group, which resumes from the user's checkpoint
(tests/frameworks/torch/torchrun_train.py), and a group that meets in a store an earlier
attempt wrote to does not take its keys (ringcc/torch/fresh_store.py)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from rank_groups import rank_environment, run_command

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from ringcc.torch.fresh_store import fresh_prefix  # noqa: E402

HERE = Path(__file__).resolve().parent

STEPS, EVERY, KILL_AT = 30, 5, 12
TORCHRUN_LIMIT_S = 240


def torchrun_command(*script_args):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    launcher = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    return [
        *launcher,
        "--nnodes=1",
        "--nproc-per-node=2",
        "--max-restarts=3",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=127.0.0.1:0",
        "--monitor-interval=0.1",
        str(HERE / "torchrun_train.py"),
        *script_args,
    ]


def test_torchrun_restarts_the_group_and_training_resumes_from_the_checkpoint(tmp_path):
    """Rank 1 kills itself (SIGKILL) in step 12 of the first attempt: rank 0 fails at once,
    torchrun starts a second attempt, which meets (no stale keys of the first: one restart
    is enough), resumes from the step-10 checkpoint and ends with parameters bitwise equal to
    an uninterrupted run's; the killed rank's shared memory is gone."""
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    checkpoint.mkdir()
    out.mkdir()
    command = torchrun_command(
        "--steps",
        str(STEPS),
        "--every",
        str(EVERY),
        "--checkpoint",
        str(checkpoint),
        "--out",
        str(out),
        "--kill-rank",
        "1",
        "--kill-at",
        str(KILL_AT),
    )
    env = rank_environment({"RINGCC_TIMEOUT_S": "30"})
    completed = run_command(command, env, TORCHRUN_LIMIT_S, cwd=str(tmp_path))
    assert completed.returncode == 0, completed.describe()
    finished = sorted(p.name for p in out.glob("attempt*.json"))
    assert finished == ["attempt1-rank0.json", "attempt1-rank1.json"], (
        f"expected the second attempt (only) to finish, got {finished}\n{completed.describe()}"
    )
    import json

    for name in finished:
        record = json.loads((out / name).read_text())
        assert record["start"] == (KILL_AT // EVERY) * EVERY, f"{name}: resumed from step {record['start']}"
        assert record["size"] == 2
    sys.path.insert(0, str(HERE))
    from torchrun_train import reference_parameters

    got = torch.load(out / "final.pt")
    want = reference_parameters(STEPS, 2)
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), f"parameter {i} differs from an uninterrupted run: {(g - w).abs().max()}"
    pids = [(out / name).read_text() for name in os.listdir(out) if name.startswith("pid-")]
    left = [name for name in os.listdir("/dev/shm") if any(f"-p{pid}-" in name for pid in pids)]
    assert not left, f"left in /dev/shm: {left}"


def meet(store, size, timeout_s=20.0, order=None):
    """Runs fresh_prefix on every rank of `size` in threads (started in `order`); returns the prefixes."""
    got = [None] * size
    errors = []

    def rank_thread(rank):
        try:
            got[rank] = fresh_prefix(store, rank, size, timeout_s)
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in (order or range(size))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 10)
    assert not errors, errors
    return got


def test_a_new_attempt_does_not_take_an_earlier_attempts_keys():
    """The store holds a whole earlier attempt's keys (and one half-finished: rank 2 never
    arrived); the new attempt's ranks, rank 0 last, agree on a prefix of their own."""
    store = dist.HashStore()
    first = meet(store, 3)
    assert len(set(first)) == 1
    # A half-finished attempt: rank 2 never arrives, rank 0 gives up.
    rank1 = threading.Thread(target=fresh_prefix, args=(store, 1, 3, 1.0))
    rank1.start()
    with pytest.raises(TimeoutError, match="rank\\(s\\) \\[2\\]"):
        fresh_prefix(store, 0, 3, 1.0)
    rank1.join(5)
    second = meet(store, 3, order=[2, 1, 0])
    assert len(set(second)) == 1 and second[0] != first[0], (first, second)
    third = meet(store, 3, order=[1, 0, 2])
    assert len(set(third)) == 1 and third[0] not in (first[0], second[0])


def test_a_rank_that_never_arrives_is_a_bounded_wait():
    store = dist.HashStore()
    with pytest.raises(TimeoutError, match="rank\\(s\\) \\[1\\]"):
        fresh_prefix(store, 0, 2, 0.5)
    with pytest.raises(TimeoutError, match="rank 0"):
        fresh_prefix(dist.HashStore(), 1, 2, 0.5)
