"""Jobs of two ranks in which rank 1 leaves while rank 0 waits for it, and
both then exit the ordinary way (interpreter finalization, atexit hooks).

    python tests/harness/exit_job.py --out DIR --kinds torch-barrier,named --iterations 3

This process imports torch and ringcc once, then for every iteration and
kind forks the two ranks of a job (a fork costs nothing next to importing
torch again). Each rank writes its stderr to DIR/<kind>.<iteration>.rank<R>.err;
the parent waits for both (each job bounded by --job-timeout) and writes
DIR/results.json: one record per rank with its exit status (negative: the
signal that ended it; null: it had to be killed) and its stderr.

The kinds (rank 0 is the rank that waits):

* torch-barrier, torch-allreduce: PyTorch's test_barrier_timeout_full_group
  and its all_reduce twin. In a group with a short timeout rank 0 alone
  calls barrier (all_reduce) and times out, the operation still queued;
  both ranks meet (a file barrier, as torch's own test harness does after
  every test) and destroy their groups: rank 0's group, stuck, shuts down
  on a thread of its own. Rank 1 leaves once rank 0 finalizes, so that its
  leaving fails rank 0's queued operation then: rank 0's finalization waits
  (bounded) until rank 1 has left, and a little longer, as a slow one
  (torch's takes up to seconds) gives it the time to at random.
* torch-future: torch-allreduce whose operation, after wait() timed out,
  the group's completer thread waits for (get_future()).
* barrier, allreduce, named (allreduce_async_ with a name, then
  synchronize), join: after ringcc.init(), rank 0 waits on a daemon thread
  (as users' threads do) while its main thread exits; rank 1 leaves
  meanwhile.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback

TORCH_KINDS = ("torch-barrier", "torch-allreduce", "torch-future")
CORE_KINDS = ("barrier", "allreduce", "named", "join")
KINDS = TORCH_KINDS + CORE_KINDS
# The group timeout of the torch kinds, as PyTorch's test has it.
GROUP_TIMEOUT_S = 1.0
# A rank waits at most this long for the other at a file barrier.
MEET_TIMEOUT_S = 20.0
# How long rank 0's waiter runs before its main thread exits.
WAITER_HEAD_START_S = 0.2
# How long rank 0's finalization goes on after rank 1 has left (torch kinds).
FINALIZATION_AFTER_LEFT_S = 0.5


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports that are free now (held together while chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _marker(job_dir: str, step: str, rank: int) -> str:
    return os.path.join(job_dir, f"{step}.rank{rank}")


def _await_marker(path: str, what: str) -> bool:
    """Waits (bounded) until `path` exists; False when it never did."""
    deadline = time.monotonic() + MEET_TIMEOUT_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print(f"gave up waiting for {what} after {MEET_TIMEOUT_S:g} s", file=sys.stderr)
            return False
        time.sleep(0.005)
    return True


def _meet(job_dir: str, rank: int, step: str) -> None:
    """Returns once both ranks reached `step` (a file each; bounded)."""
    open(_marker(job_dir, step, rank), "w").close()
    if not _await_marker(_marker(job_dir, step, 1 - rank), f"the other rank to reach '{step}'"):
        raise SystemExit(3)


class _FinalizationHold:
    """Held by rank 0's __main__ module, so that its __del__ runs while the
    interpreter finalizes (after every atexit hook): there it tells rank 1
    to leave, waits until it has, and lets rank 0's threads meet that."""

    def __init__(self, job_dir: str) -> None:
        self.finalizing = _marker(job_dir, "finalizing", 0)
        self.left = _marker(job_dir, "left", 1)
        # What __del__ needs, kept here: module globals are being cleared then.
        self.open, self.await_marker, self.sleep = open, _await_marker, time.sleep

    def __del__(self) -> None:
        self.open(self.finalizing, "w").close()
        if self.await_marker(self.left, "rank 1 to leave"):
            self.sleep(FINALIZATION_AFTER_LEFT_S)


_finalization_hold = None


def _run_torch(kind: str, rank: int, job_dir: str) -> None:
    global _finalization_hold
    import torch
    import torch.distributed as dist

    dist.init_process_group("ring", rank=rank, world_size=2)
    short = datetime.timedelta(seconds=GROUP_TIMEOUT_S)
    # The completer waits as long as the group's timeout: past rank 1's leaving.
    group = dist.new_group(timeout=datetime.timedelta(seconds=MEET_TIMEOUT_S) if kind == "torch-future" else short)
    if rank == 0:
        try:
            if kind == "torch-barrier":
                dist.barrier(group)
            elif kind == "torch-allreduce":
                dist.all_reduce(torch.ones(4), group=group)
            else:
                work = dist.all_reduce(torch.ones(4), group=group, async_op=True)
                try:
                    work.wait(short)
                finally:
                    work.get_future()  # the group's completer thread waits for it now
            print("rank 0: the operation returned; it should have timed out", file=sys.stderr)
        except Exception as error:  # noqa: BLE001 - expected: the group's timeout
            print(f"rank 0 raised as expected: {type(error).__name__}", file=sys.stderr)
    _meet(job_dir, rank, "tested")
    if rank == 0:
        dist.destroy_process_group()
        _finalization_hold = _FinalizationHold(job_dir)
    else:
        _await_marker(_marker(job_dir, "finalizing", 0), "rank 0 to finalize")
        dist.destroy_process_group()
        open(_marker(job_dir, "left", 1), "w").close()


def _run_core(kind: str, rank: int, job_dir: str) -> None:
    import numpy as np

    import ringcc

    ringcc.init()
    if rank == 1:
        _meet(job_dir, rank, "waiting")
        return  # leaves: ringcc's exit hook shuts it down

    def wait() -> None:
        try:
            if kind == "barrier":
                ringcc.barrier()
            elif kind == "allreduce":
                ringcc.allreduce(np.ones(4, np.float32))
            elif kind == "named":
                ringcc.synchronize(ringcc.allreduce_async_(np.ones(4, np.float32), name="exit.named"))
            else:
                ringcc.join()
        except Exception as error:  # noqa: BLE001 - expected: the peer left
            print(f"rank 0's waiter raised as expected: {type(error).__name__}", file=sys.stderr)

    threading.Thread(target=wait, name="waiter", daemon=True).start()
    time.sleep(WAITER_HEAD_START_S)
    _meet(job_dir, rank, "waiting")


def _rank(kind: str, rank: int, ports: tuple[int, int], job_dir: str, stderr_path: str) -> None:
    """The child: runs rank `rank` of the job, then exits through Python's
    own finalization (sys.exit), never os._exit."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.update(
        {
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(ports[0]),  # torch's store
            "RINGCC_MASTER_PORT": str(ports[1]),  # ringcc's own, for ringcc.init()
            # A peer's leaving fails rank 0's queued operation; ringcc logs
            # that at debug (the failing rank reports it), which problems() reads.
            "RINGCC_LOG_LEVEL": "debug",
        }
    )
    code = 0
    try:
        if kind in TORCH_KINDS:
            _run_torch(kind, rank, job_dir)
        else:
            _run_core(kind, rank, job_dir)
    except SystemExit as exit_:
        traceback.print_exc()
        code = 3 if exit_.code not in (0, None) else 0
    except BaseException:  # noqa: BLE001 - reported through the exit status
        traceback.print_exc()
        code = 2
    sys.stderr.flush()
    sys.exit(code)


def _wait_for(pid: int, deadline: float) -> int | None:
    """The exit status of child `pid` (negative: the signal that ended it),
    or None once `deadline` passes (the child is then killed)."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_job(kind: str, iteration: int, out: str, job_timeout_s: float) -> list[dict]:
    job_dir = os.path.join(out, f"{kind}.{iteration}")
    os.makedirs(job_dir)
    torch_port, ringcc_port = _free_ports(2)
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for rank in (0, 1):
        stderr_path = os.path.join(out, f"{kind}.{iteration}.rank{rank}.err")
        pid = os.fork()
        if pid == 0:
            # SystemExit leaves through this process's frames (none of them
            # catches it) to the interpreter's own exit.
            _rank(kind, rank, (torch_port, ringcc_port), job_dir, stderr_path)
        pids.append((rank, pid, stderr_path))
    deadline = time.monotonic() + job_timeout_s
    records = []
    for rank, pid, stderr_path in pids:
        status = _wait_for(pid, deadline)
        with open(stderr_path, encoding="utf-8", errors="replace") as file:
            stderr = file.read()
        records.append({"kind": kind, "iteration": iteration, "rank": rank, "status": status, "stderr": stderr})
    return records


def problems(records: list[dict]) -> list[str]:
    """What went wrong in the jobs of results.json, one line each (none: all clean).

    Every rank exits with status 0, and no C++ runtime aborted it. In the
    torch kinds rank 0 timed out as PyTorch's test expects, and rank 1's
    leaving reached it (its queued operation failed, logged by ringcc at debug) while
    it finalized."""
    found = []
    for r in records:
        where = f"{r['kind']} #{r['iteration']} rank {r['rank']}"
        tail = r["stderr"][-3000:]
        if r["status"] != 0:
            how = "was killed after the job's timeout" if r["status"] is None else f"exited with status {r['status']}"
            found.append(f"{where} {how}; stderr:\n{tail}")
        elif "terminate called" in r["stderr"]:
            found.append(f"{where}: the C++ runtime terminated; stderr:\n{tail}")
        elif r["kind"] in TORCH_KINDS and r["rank"] == 0:
            if "raised as expected" not in r["stderr"]:
                found.append(f"{where} did not time out; stderr:\n{tail}")
            elif "left the job" not in r["stderr"]:
                found.append(f"{where}: rank 1's leaving never reached it; stderr:\n{tail}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--job-timeout", type=float, default=30.0, help="seconds a job may take")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")
    # Imported once here, so that the forked ranks start at once.
    if any(k in TORCH_KINDS for k in kinds):
        import torch.distributed  # noqa: F401

        import ringcc.torch  # noqa: F401
    import numpy  # noqa: F401

    import ringcc  # noqa: F401

    os.makedirs(args.out, exist_ok=True)
    records = []
    for iteration in range(args.iterations):
        for kind in kinds:
            records += run_job(kind, iteration, args.out, args.job_timeout)
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as file:
        json.dump(records, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
