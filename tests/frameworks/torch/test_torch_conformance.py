"""PyTorch's own distributed tests (DistributedTest._DistTestBase, shipped in
the torch wheel) against backend "ring", through tests/frameworks/torch/torch_conformance.py.

One run of 3 ranks under ringrun goes through every test of the class (most
skip at once: CUDA, other world sizes, checks hard-coded to gloo/nccl/mpi
names); a rank that crashes or hangs in a test is recorded against that test
and the run goes on after it. Then:

* no test may fail or crash;
* every test of EXPECTED_PASS (those that passed when this file was written,
  torch 2.13) must pass, so a regression names its test;
* the counts are printed (docs/torch.md has them, with the reasons).

RINGCC_CONFORMANCE_TESTS (comma-separated fnmatch patterns) narrows the run.

The tests of a group's timeout are gated on gloo's name ("Only gloo backend
supports timeouts"); GLOO_GATED runs them at 2 ranks with the driver's
--impersonate gloo, in processes that leave after the test as PyTorch's
harness has them leave (--finalize): the test must pass, and every rank
exit with status 0 although its peer left while it waited.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest", reason="distributed_test needs expecttest (pip install expecttest)")

import torch_conformance  # noqa: E402
from rank_groups import (  # noqa: E402
    HARD_TIMEOUT_MARGIN_S,
    rank_environment,
    ringrun_command,
    run_command,
)

HERE = Path(__file__).resolve().parent
WORLD_SIZE = 3
RUN_TIMEOUT_S = 600
MAX_RESTARTS = 4
ENV = {"RINGCC_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1", "PYTORCH_PRINT_REPRO_ON_FAILURE": "0"}

EXPECTED_PASS = frozenset(
    """
test_Backend_enum_class test_DistributedDataParallelCPU test_DistributedDataParallelCPU_grad_is_view
test_DistributedDataParallel_requires_grad test_all_gather test_all_gather_coalesced_complex
test_all_gather_coalesced_full_group test_all_gather_coalesced_simple test_all_gather_coalesced_with_empty
test_all_gather_complex test_all_gather_full_group test_all_reduce_coalesced_max_complex_unsupported
test_all_reduce_complex_unsupported_ops test_all_reduce_full_group_max test_all_reduce_full_group_min
test_all_reduce_full_group_product test_all_reduce_full_group_sum test_all_reduce_max test_all_reduce_min
test_all_reduce_product test_all_reduce_sum test_all_reduce_sum_async test_all_reduce_sum_complex test_barrier
test_barrier_full_group test_broadcast test_broadcast_full_group test_ddp_create_graph test_ddp_logging_data_cpu
test_destroy_full_group test_destroy_group test_dump_DDP_relevant_env_vars test_gather test_gather_checks
test_gather_full_group test_get_backend test_get_rank test_get_rank_size_full_group test_get_rank_size_group
test_irecv test_isend test_isend_autograd_profiler test_isend_torch_profiler test_reduce_full_group_max
test_reduce_full_group_min test_reduce_full_group_product test_reduce_full_group_sum test_reduce_max
test_reduce_min test_reduce_product test_reduce_sum test_reduce_sum_twice test_scatter test_scatter_checks
test_scatter_complex test_scatter_full_group test_send_recv test_send_recv_any_source
test_send_recv_any_source_autograd_profiler test_send_recv_any_source_torch_profiler
test_send_recv_autograd_profiler test_send_recv_torch_profiler test_send_recv_with_tag
test_send_recv_with_tag_autograd_profiler test_send_recv_with_tag_torch_profiler test_static_graph_api_cpu
""".split()
)


# Tests gated on gloo's name, run as above; each in EXIT_RUNS jobs, as a
# rank's exit races with its peer's leaving.
GLOO_GATED = ("test_barrier_timeout_full_group",)
GLOO_GATED_WORLD_SIZE = 2
EXIT_RUNS = 3
EXIT_RUN_TIMEOUT_S = 120


def _run_all(root: Path):
    """Runs the driver until every selected test has a record; returns {test: {rank: record}}."""
    patterns = os.environ.get("RINGCC_CONFORMANCE_TESTS", "")
    tests, outputs = {}, []
    for attempt in range(MAX_RESTARTS + 1):
        results, work = root / f"results{attempt}", root / f"work{attempt}"
        args = [str(HERE / "torch_conformance.py"), "--results", str(results), "--workdir", str(work)]
        if patterns:
            args += ["--tests", patterns]
        if tests:
            args += ["--exclude", ",".join(sorted(tests))]
        command = ringrun_command(WORLD_SIZE, args, ["--timeout", str(RUN_TIMEOUT_S)])
        completed = run_command(command, rank_environment(ENV), RUN_TIMEOUT_S + HARD_TIMEOUT_MARGIN_S)
        outputs.append(completed)
        found = torch_conformance.read_records(str(results), WORLD_SIZE)
        tests.update(found)
        finished = all(
            (results / f"rank{r}.jsonl").exists() and '"kind": "end"' in (results / f"rank{r}.jsonl").read_text()
            for r in range(WORLD_SIZE)
        )
        if finished:
            return tests, outputs
        if not any(rec["status"] == "crash" for per_rank in found.values() for rec in per_rank.values()):
            break  # it stopped without naming a test: do not loop
    return tests, outputs


@pytest.fixture(scope="module")
def conformance(tmp_path_factory):
    tests, outputs = _run_all(tmp_path_factory.mktemp("conformance"))
    if not tests:
        pytest.fail("the conformance driver recorded nothing\n" + outputs[-1].describe(), pytrace=False)
    return tests, torch_conformance.summarize(tests, WORLD_SIZE), outputs


def test_no_test_fails_or_crashes(conformance):
    tests, summary, outputs = conformance
    skips = sum(len(v) for v in summary["skip"].values())
    print(
        f"\nconformance ({WORLD_SIZE} ranks): {len(summary['pass'])} pass, {len(summary['fail'])} fail, "
        f"{len(summary['crash'])} crash, {skips} skip",
        file=sys.stderr,
    )
    for category, names in sorted(summary["skip"].items()):
        print(f"  skipped, {category}: {len(names)}", file=sys.stderr)
    problems = {**summary["fail"], **summary["crash"]}
    if problems:
        text = "\n\n".join(f"{name}: {reason}" for name, reason in problems.items())
        pytest.fail(f"{len(problems)} of PyTorch's distributed tests failed on backend 'ring':\n{text}", pytrace=False)


@pytest.mark.parametrize("name", sorted(EXPECTED_PASS))
def test_expected_to_pass(conformance, name):
    tests, _, _ = conformance
    if name not in tests:
        if os.environ.get("RINGCC_CONFORMANCE_TESTS"):
            pytest.skip("not selected by RINGCC_CONFORMANCE_TESTS")
        pytest.skip(f"this torch's distributed_test has no {name}")
    status, reason = torch_conformance.verdict(tests[name], WORLD_SIZE)
    assert status == "pass", f"{name}: {status}: {reason}"


@pytest.mark.parametrize("name", GLOO_GATED)
def test_gloo_gated_passes_and_ranks_exit_cleanly(tmp_path, name):
    for run in range(EXIT_RUNS):
        results, work = tmp_path / f"results{run}", tmp_path / f"work{run}"
        args = [str(HERE / "torch_conformance.py"), "--results", str(results), "--workdir", str(work)]
        args += ["--tests", name, "--impersonate", "gloo", "--finalize"]
        command = ringrun_command(GLOO_GATED_WORLD_SIZE, args, ["--timeout", str(EXIT_RUN_TIMEOUT_S)])
        completed = run_command(command, rank_environment(ENV), EXIT_RUN_TIMEOUT_S + HARD_TIMEOUT_MARGIN_S)
        tests = torch_conformance.read_records(str(results), GLOO_GATED_WORLD_SIZE)
        assert name in tests, f"run {run}: the driver recorded nothing for {name}\n{completed.describe()}"
        status, reason = torch_conformance.verdict(tests[name], GLOO_GATED_WORLD_SIZE)
        assert status == "pass", f"run {run}: {name}: {status}: {reason}"
        assert "terminate called" not in completed.stderr, f"run {run}: a rank aborted\n{completed.describe()}"
        assert completed.returncode == 0, f"run {run}: a rank did not exit cleanly\n{completed.describe()}"
