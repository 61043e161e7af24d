"""Contended CPUs: the wait policy ranks choose (RINGCC_WAIT_POLICY, ranks
that outnumber their CPUs), ringrun --bind-to, and the bench's
--busy-threads load. Each test starts one short job; no timing is asserted.

A job's CPUs are restricted by starting ringrun with a narrower affinity
mask (ringrun and its ranks inherit it), so the tests do not depend on how
many CPUs the machine has beyond the ones they name."""

from __future__ import annotations

import json
import os
import sys

import pytest
from rank_groups import rank_environment, ringrun_command, run_command

TIMEOUT_S = 120

# Each rank prints one JSON line: its rank, affinity and wait policy, after
# allreduces that wait (every policy must still compute the right sums).
REPORT = r"""
import json, os, sys
import numpy as np
import ringcc
ringcc.init()
r, n = ringcc.rank(), ringcc.size()
for size in (1, 1000, 300000):
    x = np.full(size, r + 1.0)
    ringcc.allreduce_(x)
    assert np.all(x == n * (n + 1) / 2), (size, x[:3])
h = ringcc.allreduce_async(np.full(10, float(r)), name="named")
assert np.all(ringcc.synchronize(h) == n * (n - 1) / 2)
print("REPORT " + json.dumps({"rank": r, "cpus": sorted(os.sched_getaffinity(0)),
                              "policy": ringcc.wait_policy()}), flush=True)
ringcc.shutdown()
"""


def _run_job(tmp_path, num_ranks, env=None, launcher_options=(), cpus=None, source=REPORT):
    script = tmp_path / "report.py"
    script.write_text(source)
    command = ringrun_command(num_ranks, [str(script)], launcher_options)
    if cpus is not None:
        # Start ringrun itself on these CPUs only: its ranks inherit the mask.
        command = [
            sys.executable,
            "-c",
            f"import os, sys; os.sched_setaffinity(0, {set(cpus)!r}); os.execv(sys.argv[1], sys.argv[1:])",
            *command,
        ]
    done = run_command(command, rank_environment(env), TIMEOUT_S)
    assert done.returncode == 0, done.describe()
    reports = {}
    for line in done.stdout.splitlines():
        _, sep, payload = line.partition("REPORT ")
        if sep:
            record = json.loads(payload)
            reports[record["rank"]] = record
    assert sorted(reports) == list(range(num_ranks)), done.describe()
    return reports


def _usable_cpus():
    return sorted(os.sched_getaffinity(0))


def test_more_ranks_than_cpus_sleep_instead_of_spinning(ringcc_module, tmp_path):
    """Two ranks confined to one CPU: auto sees the host oversubscribed and
    stops spinning; RINGCC_WAIT_POLICY=spin keeps spinning."""
    one = _usable_cpus()[:1]
    for rec in _run_job(tmp_path, 2, cpus=one).values():
        p = rec["policy"]
        assert rec["cpus"] == one, rec
        # Yield to the peer ranks while little else runs, sleep when other
        # threads want the CPUs (which depends on the machine's load now);
        # never spin.
        assert p["setting"] == "auto" and p["oversubscribed"] is True and p["mode"] in ("yield", "block"), rec
        assert p["affinity_cpus"] == 1, rec
    for rec in _run_job(tmp_path, 2, cpus=one, env={"RINGCC_WAIT_POLICY": "spin"}).values():
        p = rec["policy"]
        assert p["setting"] == "spin" and p["mode"] == "spin" and p["oversubscribed"] is True, rec


def test_ranks_with_a_cpu_each_keep_spinning(ringcc_module, tmp_path):
    cpus = _usable_cpus()
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    for rec in _run_job(tmp_path, 2, cpus=cpus[:2]).values():
        p = rec["policy"]
        assert p["oversubscribed"] is False and p["affinity_cpus"] == 2, rec
        # The waits above were short and nothing else wanted the CPUs, unless
        # the machine is busy: then the thread may have been preempted and
        # sleeps for a while. Either way it does not yield.
        assert p["mode"] in ("spin", "block"), rec


# Each rank puts its thread on the first CPU of the job's two (then gives it
# both again: it stays there until moved), so that the two ranks take turns
# on one CPU, and runs allreduces that wait for the peer; repeated, since
# the scheduler may part them first. One JSON line per rank.
CROWDED = r"""
import json, os
import numpy as np
import ringcc
ringcc.init()
r, n = ringcc.rank(), ringcc.size()
cpus = sorted(os.sched_getaffinity(0))
for attempt in range(10):
    os.sched_setaffinity(0, cpus[:1])
    os.sched_setaffinity(0, cpus)
    for _ in range(5):
        x = np.full(1 << 20, r + 1.0, np.float32)
        ringcc.allreduce_(x)
        assert np.all(x == n * (n + 1) / 2), x[:3]
print("REPORT " + json.dumps({"rank": r, "moves": ringcc._core._cpu_moves(),
                              "cpus": sorted(os.sched_getaffinity(0))}), flush=True)
ringcc.shutdown()
"""


def test_a_waiting_rank_moves_off_the_cpu_its_peer_needs(ringcc_module, tmp_path):
    """Two ranks with two CPUs, put on one: a rank that waits for a peer
    whose last CPU is its own moves to the other CPU and keeps its affinity
    mask; RINGCC_MOVE_OFF_PEER_CPU=0 leaves them where the scheduler puts
    them."""
    cpus = _usable_cpus()
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")

    def run(env):
        reports = _run_job(tmp_path, 2, env=env, cpus=cpus[:2], source=CROWDED).values()
        for rec in reports:
            assert rec["cpus"] == cpus[:2], rec  # the mask given back after every move
        return sum(rec["moves"] for rec in reports)

    assert run({}) >= 1
    assert run({"RINGCC_MOVE_OFF_PEER_CPU": "0"}) == 0


@pytest.mark.parametrize("policy", ["yield", "block"])
def test_forced_policies_compute_the_same_results(ringcc_module, tmp_path, policy):
    for rec in _run_job(tmp_path, 3, env={"RINGCC_WAIT_POLICY": policy}).values():
        assert rec["policy"]["mode"] == policy and rec["policy"]["setting"] == policy, rec


def test_unknown_wait_policy_fails_at_init(ringcc_module, tmp_path):
    script = tmp_path / "init.py"
    script.write_text("import ringcc\nringcc.init()\n")
    done = run_command(ringrun_command(2, [str(script)]), rank_environment({"RINGCC_WAIT_POLICY": "nap"}), TIMEOUT_S)
    assert done.returncode not in (0, None), done.describe()
    assert "RINGCC_WAIT_POLICY must be auto, spin, yield or block, not 'nap'" in done.stderr, done.describe()


def test_bind_to_core_gives_each_rank_its_core(ringcc_module, tmp_path):
    cpus = _usable_cpus()
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    reports = _run_job(tmp_path, 2, launcher_options=["--bind-to", "core"], cpus=cpus[:2])
    masks = [tuple(reports[r]["cpus"]) for r in range(2)]
    assert masks[0] != masks[1] and not set(masks[0]) & set(masks[1]), masks
    assert set(masks[0]) | set(masks[1]) <= set(cpus[:2]), masks
    for rec in reports.values():
        # Bound ranks are not oversubscribed: together they have both CPUs.
        assert rec["policy"]["affinity_cpus"] == len(rec["cpus"]), rec
        assert rec["policy"]["oversubscribed"] is False, rec
    # More ranks than cores: round robin, and the host is oversubscribed.
    reports = _run_job(tmp_path, 3, launcher_options=["--bind-to", "core"], cpus=cpus[:2])
    assert reports[2]["cpus"] == reports[0]["cpus"], reports
    assert all(rec["policy"]["oversubscribed"] for rec in reports.values()), reports


def test_bind_to_none_leaves_ranks_unbound(ringcc_module, tmp_path):
    reports = _run_job(tmp_path, 2, launcher_options=["--bind-to", "none"])
    for rec in reports.values():
        assert rec["cpus"] == _usable_cpus(), rec


def test_bind_to_in_the_mpirun_command():
    sys.path.insert(0, str(os.path.join(os.path.dirname(__file__), "..", "..", "adapters")))
    from ringcc.launch import cli, mpirun

    args = cli.build_parser().parse_args(["-np", "2", "--bind-to", "core"])
    cmd = mpirun.plan_mpi_command(args, ["python", "x.py"], {}, "/usr/bin/mpirun", "openmpi", cpu_count=4)
    assert cmd[cmd.index("--bind-to") + 1] == "core", cmd
    cmd = mpirun.plan_mpi_command(args, ["python", "x.py"], {}, "/usr/bin/mpiexec", "mpich", cpu_count=4)
    assert cmd[cmd.index("-bind-to") + 1] == "core", cmd
    args = cli.build_parser().parse_args(["-np", "2"])
    cmd = mpirun.plan_mpi_command(args, ["python", "x.py"], {}, "/usr/bin/mpirun", "openmpi", cpu_count=4)
    assert cmd[cmd.index("--bind-to") + 1] == "none", cmd


def test_bench_busy_threads_run_beside_every_implementation(ringcc_module, tmp_path):
    """ringcc.bench.allreduce --busy-threads 1: the compute threads did matrix
    products during ringcc's sweep, and the run says so."""
    out = tmp_path / "bench.json"
    repo = os.path.join(os.path.dirname(__file__), "..", "..")
    command = ringrun_command(
        2,
        [
            "-m",
            "ringcc.bench.allreduce",
            "--ops",
            "allreduce",
            "--minbytes",
            "8",
            "--maxbytes",
            "64K",
            "--stepfactor",
            "64",
            "--iters",
            "20",
            "--warmup",
            "2",
            "--repeats",
            "1",
            "--busy-threads",
            "1",
            "--no-progress",
            "--json",
            str(out),
        ],
        ["--no-prefix"],
    )
    env = rank_environment({"PYTHONPATH": os.pathsep.join([os.path.abspath(repo), rank_environment()["PYTHONPATH"]])})
    done = run_command(command, env, TIMEOUT_S, cwd=repo)
    assert done.returncode == 0, done.describe()
    doc = json.loads(out.read_text())
    assert doc["meta"]["busy_threads"] == 1, doc["meta"]
    assert doc["meta"]["busy_products_rank0"] > 0, doc["meta"]
    assert "1 busy thread(s) per rank" in done.stdout, done.describe()
    assert {8, 512, 32768} <= {e["nbytes"] for e in doc["results"]}, doc["results"]


def test_bench_out_of_place_rounds(ringcc_module, tmp_path):
    """ringcc.bench.out_of_place runs its rounds (and checks the results) in a short job."""
    repo = os.path.join(os.path.dirname(__file__), "..", "..")
    command = ringrun_command(
        2,
        [
            "-m",
            "ringcc.bench.out_of_place",
            "--tensors",
            "40",
            "--elements",
            "64",
            "--rounds",
            "2",
            "--torch",
            "--work-ms",
            "2",
        ],
        ["--no-prefix"],
    )
    env = rank_environment({"PYTHONPATH": os.pathsep.join([os.path.abspath(repo), rank_environment()["PYTHONPATH"]])})
    done = run_command(command, env, TIMEOUT_S, cwd=repo)
    assert done.returncode == 0, done.describe()
    for label in (
        "named out of place",
        "named in place",
        "one concatenated",
        "hvd.allreduce_async_",
        "out of place / one concatenated:",
        "hvd out of place / in place:",
        "2 ms of other work before each",
    ):
        assert label in done.stdout, done.describe()
