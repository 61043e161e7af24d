"""Runs PyTorch's own distributed tests against backend "ring".

The tests are those of `DistributedTest._DistTestBase` in
torch/testing/_internal/distributed/distributed_test.py, which ships in the
torch wheel. PyTorch's own driver (test/distributed/test_distributed_spawn.py,
not in the wheel) accepts only gloo, nccl and ucc and spawns fresh processes
for every test; this one starts the ranks once and runs the tests one after
the other inside them, each in a process group of its own:

    ringrun -np 3 python tests/frameworks/torch/torch_conformance.py --results DIR --workdir DIR2 \\
        [--tests 'test_all_reduce*,...']
    torchrun --nproc-per-node 3 tests/frameworks/torch/torch_conformance.py ...

Per test, every rank: meets the others (a file barrier in --workdir), makes a
fresh TEMP_DIR and init file, init_process_group(backend="ring") with the
test's timeout, runs the test method, meets the others again and destroys
the group, as PyTorch's harness does (a rank that leaves early would fail
what the others still wait for). Each rank appends
JSON lines to RESULTS/rank<R>.jsonl: {"kind": "start", "name"} before a test
and {"kind": "result", "name", "status": pass|skip|fail, "reason",
"seconds"} after it, so a crash or a hang still names the test it happened
in (tests/frameworks/torch/test_torch_conformance.py restarts the run after it). Once every
test ran, the ranks meet and leave at once (os._exit: some tests leave
threads and groups behind); with --finalize they leave as PyTorch's harness
has each test's processes leave instead, right after destroying the last
group, through the interpreter's own exit (atexit hooks, finalization).

distributed_test reads BACKEND and WORLD_SIZE when it is imported, and its
skip decorators read DistTestCases.backend_feature then too, so "ring" is
added to the "plugin", "subgroup" and "ddp" features before the import. It
needs `expecttest`; the `*_group` tests need WORLD_SIZE >= 3.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import functools
import json
import os
import sys
import time
import traceback
import unittest

SYNC_TIMEOUT_S = 180.0
FEATURES = ("plugin", "subgroup", "ddp")

# Why a test is skipped, by its skip message (first match wins).
SKIP_CATEGORIES = (
    ("needs CUDA or several GPUs", ("CUDA", "GPU", "cuda", "gpu")),
    (
        "hard-coded to other backends",
        (
            "Only ",
            "only supported on",
            "requires backend",
            "backend supports",
            "Batch Send Recv",
            "Send Recv Only",
            "does not support",
            "tests with NCCL only",
        ),
    ),
    ("needs another world size", ("world size", "worldsize")),
    ("disabled upstream (issue link)", ("github.com/pytorch", "Test is failing")),
)


def classify_skip(reason: str) -> str:
    for category, fragments in SKIP_CATEGORIES:
        if any(f in reason for f in fragments):
            return category
    return "other"


def read_records(results_dir: str, world: int) -> dict[str, dict[int, dict]]:
    """{test: {rank: result record}} from RESULTS/rank<R>.jsonl; a test a rank
    started without finishing gets status "crash"."""
    tests: dict[str, dict[int, dict]] = {}
    for rank in range(world):
        path = os.path.join(results_dir, f"rank{rank}.jsonl")
        if not os.path.exists(path):
            continue
        pending = None
        with open(path, encoding="utf-8") as file:
            for line in file:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("kind") == "start":
                    pending = record["name"]
                elif record.get("kind") == "result":
                    tests.setdefault(record["name"], {})[rank] = record
                    pending = None
        if pending is not None:
            tests.setdefault(pending, {})[rank] = {
                "name": pending,
                "status": "crash",
                "reason": "the rank died or hung in this test",
                "seconds": 0,
            }
    return tests


def verdict(per_rank: dict[int, dict], world: int):
    """(status, reason) of one test over all ranks: fail/crash beats skip beats pass."""
    records = list(per_rank.values())
    for status in ("crash", "fail"):
        bad = [r for r in records if r["status"] == status]
        if bad:
            return status, bad[0]["reason"]
    if len(records) < world:
        return "crash", "some ranks recorded nothing"
    skips = [r for r in records if r["status"] == "skip"]
    if skips:
        return "skip", skips[0]["reason"]
    return "pass", ""


def summarize(tests: dict[str, dict[int, dict]], world: int) -> dict:
    summary = {"pass": [], "fail": {}, "crash": {}, "skip": {}}
    for name in sorted(tests):
        status, reason = verdict(tests[name], world)
        if status == "pass":
            summary["pass"].append(name)
        elif status == "skip":
            summary["skip"].setdefault(classify_skip(reason), {})[name] = reason
        else:
            summary[status][name] = reason
    return summary


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", required=True, help="directory for rank<R>.jsonl")
    parser.add_argument("--workdir", help="scratch directory shared by the ranks (fresh for every run)")
    parser.add_argument("--tests", default="", help="comma-separated fnmatch patterns (default: all)")
    parser.add_argument("--exclude", default="", help="comma-separated test names to leave out")
    parser.add_argument(
        "--features",
        default=",".join(FEATURES),
        help="DistTestCases.backend_feature sets that get 'ring' (default: %(default)s; "
        "adding 'gpu' also runs the CPU paths of tests gated on nccl/gloo/ucc)",
    )
    parser.add_argument(
        "--impersonate",
        default="",
        metavar="BACKEND",
        help="let the tests believe BACKEND (e.g. gloo) runs while the groups are 'ring': "
        "runs the tests hard-coded to that backend's name (informative only)",
    )
    parser.add_argument(
        "--finalize",
        action="store_true",
        help="after the last test, exit through the interpreter's finalization without meeting the other ranks "
        "(as PyTorch's harness ends each test's processes), rather than meet them and os._exit",
    )
    parser.add_argument("--list", action="store_true", help="print the selected test names and exit")
    parser.add_argument(
        "--summarize",
        type=int,
        metavar="WORLD_SIZE",
        help="print the counts found in --results (written by WORLD_SIZE ranks) and exit",
    )
    return parser.parse_args(argv)


def _write(path: str, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()


def _file_barrier(workdir: str, rank: int, world: int, index: int) -> None:
    """Returns once every rank has reached test `index` (independent of any
    process group, so a test that broke its group cannot stop the next)."""
    sync_dir = os.path.join(workdir, "sync")
    os.makedirs(sync_dir, exist_ok=True)
    mine = os.path.join(sync_dir, f"rank{rank}")
    with open(mine + ".tmp", "w", encoding="ascii") as file:
        file.write(str(index))
    os.replace(mine + ".tmp", mine)
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        arrived = 0
        for r in range(world):
            try:
                with open(os.path.join(sync_dir, f"rank{r}"), encoding="ascii") as file:
                    if int(file.read() or -1) >= index:
                        arrived += 1
            except (OSError, ValueError):
                pass
        if arrived == world:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"rank {rank}: the ranks did not meet before test #{index} within {SYNC_TIMEOUT_S:g} s")
        time.sleep(0.01)


def _skip_reason_for_exit(code, test_skips) -> str | None:
    for skip in test_skips.values():
        if skip.exit_code == code:
            return skip.message
    return None


def load_suite(features=FEATURES, impersonate=""):
    """Imports distributed_test with "ring" enabled; returns (test class, module, TEST_SKIPS)."""
    os.environ["BACKEND"] = impersonate or "ring"
    import torch  # noqa: F401
    from torch.testing._internal.common_distributed import TEST_SKIPS, DistTestCases

    import ringcc.torch  # noqa: F401  (registers backend "ring")

    for feature in features:
        DistTestCases.backend_feature.setdefault(feature, set()).add("ring")
    from torch.testing._internal.distributed import distributed_test as dt

    class RingConformance(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        pass

    return RingConformance, dt, TEST_SKIPS


def select(names: list[str], patterns: list[str], exclude: list[str]) -> list[str]:
    chosen = [n for n in names if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    return [n for n in chosen if n not in set(exclude)]


def run_test(cls, dt, test_skips, name: str, rank: int, world: int, test_dir: str, meet_after):
    import torch.distributed as dist
    from torch.testing._internal import common_utils

    for sub in ("barrier", "test_dir", "init_dir"):
        os.makedirs(os.path.join(test_dir, sub), exist_ok=True)
    os.environ["TEMP_DIR"] = test_dir
    dt.Barrier.barrier_id = 0
    case = cls(name)
    case.rank = rank
    case.file_name = os.path.join(test_dir, "init_file")
    timeout = datetime.timedelta(seconds=dt.CUSTOM_PG_TIMEOUT.get(name, dt.default_pg_timeout))
    status, reason = "pass", ""
    method = getattr(cls, name)
    if getattr(method, "__unittest_skip__", False):
        # unittest.skipIf-style marks (skip_but_pass_in_sandcastle_if) only act
        # through unittest's runner, which this driver does not use.
        return "skip", getattr(method, "__unittest_skip_why__", "")
    try:
        dist.init_process_group(
            init_method=case.init_method, backend="ring", world_size=world, rank=rank, timeout=timeout
        )
        case._barrier()
        common_utils.set_rng_seed(common_utils.SEED)
        getattr(case, name)()
    except unittest.SkipTest as skip:
        status, reason = "skip", str(skip)
    except SystemExit as exit_:
        message = _skip_reason_for_exit(exit_.code, test_skips)
        if message is not None and exit_.code != 0:
            status, reason = "skip", message
        elif exit_.code in (0, None):
            status = "pass"
        else:
            status, reason = "fail", f"SystemExit({exit_.code!r})"
    except BaseException as error:  # noqa: BLE001 - recorded
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        status, reason = "fail", f"{type(error).__name__}: {error}"[:2000] + "\n" + "".join(lines[-8:])[-3000:]
    finally:
        meet_after()
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the next test gets a group of its own
            pass
    return status, reason


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.summarize:
        summary = summarize(read_records(args.results, args.summarize), args.summarize)
        print(
            f"pass {len(summary['pass'])}, fail {len(summary['fail'])}, crash {len(summary['crash'])}, "
            f"skip {sum(len(v) for v in summary['skip'].values())}"
        )
        for category, tests in sorted(summary["skip"].items()):
            print(f"  skip: {category}: {len(tests)}")
        for status in ("fail", "crash"):
            for name, reason in summary[status].items():
                print(f"{status}: {name}: {reason.splitlines()[0] if reason else ''}")
        return 0
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    # A test that desynchronises the ranks fails within this bound instead of hanging.
    os.environ.setdefault("RINGCC_TIMEOUT_S", "20")
    os.makedirs(args.workdir, exist_ok=True)
    os.environ["TEMP_DIR"] = args.workdir
    if not args.workdir:
        raise SystemExit("--workdir is needed to run tests")
    cls, dt, test_skips = load_suite([f for f in args.features.split(",") if f], args.impersonate)
    names = select(
        sorted(n for n in dir(cls) if n.startswith("test_")),
        [p for p in args.tests.split(",") if p],
        [e for e in args.exclude.split(",") if e],
    )
    if args.list:
        if rank == 0:
            print("\n".join(names))
        return 0
    import torch

    torch._C._set_print_stack_traces_on_fatal_signal(True)
    os.makedirs(args.results, exist_ok=True)
    out = os.path.join(args.results, f"rank{rank}.jsonl")
    for index, name in enumerate(names):
        # Two meetings a test: before it (2 * index) and after it (2 * index + 1).
        _file_barrier(args.workdir, rank, world, 2 * index)
        _write(out, {"kind": "start", "name": name})
        start = time.monotonic()
        test_dir = os.path.join(args.workdir, f"t{index:03d}")
        meet_after = functools.partial(_file_barrier, args.workdir, rank, world, 2 * index + 1)
        status, reason = run_test(cls, dt, test_skips, name, rank, world, test_dir, meet_after)
        _write(
            out,
            {
                "kind": "result",
                "name": name,
                "status": status,
                "reason": reason,
                "seconds": round(time.monotonic() - start, 3),
            },
        )
    if args.finalize:
        _write(out, {"kind": "end"})
        return 0
    _file_barrier(args.workdir, rank, world, 2 * len(names))
    _write(out, {"kind": "end"})
    sys.stdout.flush()
    # Leave at once: some tests leave threads and groups behind.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
