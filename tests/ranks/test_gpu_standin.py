"""CUDA collectives on machines without a GPU, through the stand-in CUDA
driver of tests/ranks/device_double/fake_cuda.cc: a test double whose "device
memory" is host memory and whose streams run synchronously. It never
measures a GPU; it lets real multi-rank jobs run ringcc's GPU code paths:
agreement over the host path (MismatchError between host and CUDA tensors),
backend selection, CUDA IPC (staging areas shared between processes, flags
waited on through stream memory operations, ringcc's kernels, compiled by
the NVRTC of the nvidia-cuda-nvrtc wheel and run by the stand-in as host
code) and host staging (device-to-host, the host algorithms,
host-to-device), fused batches, ragged allgather, alltoall with counts,
stream handles, and a killed rank."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cuda_wheels import nvrtc_library
from rank_gpu_cases import CASES
from rank_groups import GroupRun, rank_environment, ringcc, run_command
from rank_harness import read_results

HERE = Path(__file__).resolve().parent

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fake_cuda(tmp_path_factory):
    compiler = shutil.which("c++") or shutil.which("g++")
    if not compiler:
        pytest.skip("no C++ compiler to build the stand-in CUDA driver")
    directory = tmp_path_factory.mktemp("fake_cuda")
    libraries = {}
    for source, name in (("fake_cuda.cc", "libcuda.so.1"), ("fake_nccl.cc", "libnccl.so.2")):
        libraries[name] = directory / name
        subprocess.run(
            [
                compiler,
                "-std=c++17",
                "-O1",
                "-shared",
                "-fPIC",
                "-Wl,-Bsymbolic",
                "-I",
                str(REPO),
                "-o",
                str(libraries[name]),
                str(HERE / "device_double" / source),
            ],
            check=True,
            timeout=300,
        )
    memory = directory / "memory"
    memory.mkdir()
    # Without NCCL unless a group asks for the stand-in NCCL (STANDIN_NCCL).
    return {
        "RINGCC_CUDA_LIB": str(libraries["libcuda.so.1"]),
        "RINGCC_FAKE_CUDA_DIR": str(memory),
        "RINGCC_CACHE_DIR": str(directory / "cache"),
        "RINGCC_TEST_ARRAYS": "fake",
        "RINGCC_FAKE_CUDA_WAIT_S": "120",
        "RINGCC_NCCL_LIB": "/nonexistent/libnccl.so.2",
        "STANDIN_NCCL": str(libraries["libnccl.so.2"]),
    }


@pytest.fixture(scope="session")
def nvrtc():
    return nvrtc_library("cu13")


NCCL = {"RINGCC_FAKE_CUDA_GPU": "per-rank", "RINGCC_TEST_EXPECT_BACKEND": "nccl", "RINGCC_NCCL_LIB": "standin"}
GROUPS = {
    # name: (size, environment, tags, needs NVRTC)
    # Every rank on its own (stand-in) GPU with the stand-in NCCL: the NCCL backend.
    "nccl-1": (1, NCCL, (), True),
    "nccl-2": (2, NCCL, (), True),
    "nccl-3": (3, {**NCCL, "RINGCC_TRANSPORT": "tcp"}, (), True),
    "ipc-1": (1, {"RINGCC_TEST_EXPECT_BACKEND": "ipc"}, (), True),
    "ipc-2": (2, {"RINGCC_TEST_EXPECT_BACKEND": "ipc", "RINGCC_IPC_BUFFER_BYTES": str(256 << 10)}, (), True),
    # Three ranks with a small one-shot limit: reduce-scatter + allgather.
    "ipc-3": (
        3,
        {
            "RINGCC_TEST_EXPECT_BACKEND": "ipc",
            "RINGCC_IPC_BUFFER_BYTES": str(256 << 10),
            "RINGCC_IPC_ONESHOT_BYTES": "1024",
        },
        (),
        True,
    ),
    # The flag words in registered host memory instead of device memory;
    # the stand-in says the ranks share the device through MPS.
    "ipc-2-host-flags": (
        2,
        {"RINGCC_TEST_EXPECT_BACKEND": "ipc", "RINGCC_IPC_FLAGS": "host", "RINGCC_FAKE_CUDA_MPS": "1"},
        (),
        True,
    ),
    "host-2": (2, {"RINGCC_GPU_BACKEND": "host", "RINGCC_TEST_EXPECT_BACKEND": "host"}, (), False),
    # Over TCP (the agreement through the ring header exchange), with small
    # pipelined chunks.
    "host-3-tcp": (
        3,
        {
            "RINGCC_GPU_BACKEND": "host",
            "RINGCC_TEST_EXPECT_BACKEND": "host",
            "RINGCC_TRANSPORT": "tcp",
            "RINGCC_STAGING_CHUNK_BYTES": "4096",
        },
        (),
        False,
    ),
    # Each rank on "its own GPU" but no NCCL: host staging, chosen alone.
    "own-gpus-2": (
        2,
        {
            "RINGCC_FAKE_CUDA_GPU": "per-rank",
            "RINGCC_TEST_EXPECT_BACKEND": "host",
            "RINGCC_NCCL_LIB": "/nonexistent/libnccl.so.2",
        },
        (),
        False,
    ),
    "forced-nccl-2": (
        2,
        {"RINGCC_GPU_BACKEND": "nccl", "RINGCC_NCCL_LIB": "/nonexistent/libnccl.so.2"},
        ("forced_nccl",),
        False,
    ),
    "forced-ipc-2": (2, {"RINGCC_GPU_BACKEND": "ipc"}, ("forced_ipc",), False),
}
# Groups that run one error case only.
ONLY = {"forced-nccl-2": "forced_nccl_without_nccl", "forced-ipc-2": "forced_ipc_without_nvrtc"}


def group_env(name, fake_cuda, nvrtc_path):
    size, env, tags, needs_nvrtc = GROUPS[name]
    out = {**fake_cuda, "RINGCC_TIMEOUT_S": "30", **env}
    if out["RINGCC_NCCL_LIB"] == "standin":
        out["RINGCC_NCCL_LIB"] = fake_cuda["STANDIN_NCCL"]
    if needs_nvrtc:
        out["RINGCC_NVRTC_LIB"] = nvrtc_path
    else:
        out["RINGCC_NVRTC_LIB"] = "/nonexistent/libnvrtc.so"  # host staging needs no kernels
    return out


def run_group(ranks, name, fake_cuda, request):
    size, env, tags, needs_nvrtc = GROUPS[name]
    nvrtc_path = request.getfixturevalue("nvrtc") if needs_nvrtc else ""
    return ranks.group(
        f"gpu-{name}", size, "ranks/rank_gpu_cases.py", env=group_env(name, fake_cuda, nvrtc_path), tags=tags
    )


CASE_PARAMS = [
    pytest.param(name, case.name, id=f"{name}:{case.name}")
    for name, (size, env, tags, _) in GROUPS.items()
    for case in CASES.select(size, tags)
    if ONLY.get(name, case.name) == case.name
]


@pytest.mark.parametrize("group,case_name", CASE_PARAMS)
def test_case(ranks, fake_cuda, request, group, case_name):
    run_group(ranks, group, fake_cuda, request).assert_case(case_name)


@pytest.mark.parametrize("group", [g for g in GROUPS if g not in ONLY])
def test_group_finished_cleanly(ranks, fake_cuda, request, group):
    run_group(ranks, group, fake_cuda, request).assert_clean_exit()


# --- a rank dies -------------------------------------------------------------


@pytest.mark.parametrize("backend", ["ipc", "host", "nccl"])
def test_killed_rank_fails_the_others_within_10_s(ranks, fake_cuda, request, backend):
    out_dir = ranks.scratch_dir(f"gpu-kill-{backend}")
    env = {**fake_cuda, "RINGCC_TIMEOUT_S": "8", "RINGCC_GPU_BACKEND": backend}
    env["RINGCC_NVRTC_LIB"] = request.getfixturevalue("nvrtc") if backend != "host" else "/nonexistent"
    if backend == "nccl":
        env.update(RINGCC_NCCL_LIB=fake_cuda["STANDIN_NCCL"], RINGCC_FAKE_CUDA_GPU="per-rank")
    command = ranks.command(
        3,
        [str(HERE / "gpu_deadpeer.py"), "--out", str(out_dir), "--victim", "1"],
        ["--timeout", "90", "--grace-period", "30"],
    )
    completed = ranks.run(command, ranks.environment(env), 120)
    killed = out_dir / "killed.json"
    assert killed.exists(), f"the victim never killed itself\n{completed.describe()}"
    killed_at = json.loads(killed.read_text())["time"]
    for rank in (0, 2):
        path = out_dir / f"outcome{rank}.json"
        assert path.exists(), f"rank {rank} reported nothing\n{completed.describe()}"
        outcome = json.loads(path.read_text())
        context = f"rank {rank}: {outcome}\n{completed.describe()}"
        assert outcome["class"] in ("PeerFailureError", "TimeoutError"), context
        assert re.search(r"\brank 1\b", outcome["message"]), f"the error should name rank 1; {context}"
        assert outcome["time"] - killed_at < 10, context


# --- one process ---------------------------------------------------------------


def test_cuda_info_reports_the_stand_in_and_its_device(fake_cuda):
    code = "import json, ringcc; print(json.dumps(ringcc.cuda_info()))"
    completed = subprocess.run(
        [sys.executable, "-c", code], env=rank_environment(fake_cuda), capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    info = json.loads(completed.stdout)
    assert info["found"] and info["initialized"] and info["version"] == "13.0", info
    assert info["path"] == fake_cuda["RINGCC_CUDA_LIB"]
    [device] = info["devices"]
    assert "test double" in device["name"] and device["compute_capability"] == [9, 0]
    assert device["mps"] is False, device
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", device["uuid"])
    report = subprocess.run(
        [sys.executable, "-m", "ringcc.launcher", "--check-build"],
        env=rank_environment(fake_cuda),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr
    assert f"[X] CUDA driver 13.0 ({fake_cuda['RINGCC_CUDA_LIB']})" in report.stdout
    assert "cuda:0 ringcc stand-in CUDA driver (test double" in report.stdout
    assert ", MPS off" in report.stdout, report.stdout


def test_ranks_sharing_a_gpu_without_mps_are_told_once(ranks, fake_cuda, request):
    # Without MPS the GPU runs the ranks' processes in turns (0.3 ms a
    # collective on an H100): the first rank says so once, naming the fix;
    # under MPS (the stand-in's RINGCC_FAKE_CUDA_MPS=1) nothing is said.
    advice = "without MPS: the GPU runs their processes in turns"
    without = run_group(ranks, "ipc-3", fake_cuda, request).completed.stderr
    assert without.count(advice) == 1, without[-3000:]
    assert "nvidia-cuda-mps-control -d" in without
    under_mps = run_group(ranks, "ipc-2-host-flags", fake_cuda, request).completed.stderr
    assert advice not in under_mps, under_mps[-3000:]


def rank(host="h", uuid="GPU-a", nccl=True, nvrtc=True, forced=""):
    return {"host": host, "uuid": uuid, "nccl": nccl, "nvrtc": nvrtc, "forced": forced}


def test_backend_selection():
    choose = ringcc._core._choose_gpu_backend
    assert choose([rank(uuid="A"), rank(uuid="B")])[0] == "nccl"
    assert choose([rank(host="x", uuid="A"), rank(host="y", uuid="B")])[0] == "nccl"
    assert choose([rank(uuid="A"), rank(uuid="A")])[0] == "ipc"
    assert choose([rank(uuid="A")])[0] == "nccl"
    assert choose([rank(uuid="A", nccl=False)])[0] == "ipc"
    # Distinct GPUs without NCCL, shared GPUs on several hosts, no NVRTC: staging.
    kind, reason = choose([rank(uuid="A", nccl=False), rank(uuid="B")])
    assert kind == "host" and "NCCL was not found on rank(s) 0" in reason
    kind, reason = choose([rank(host="x", uuid="A"), rank(host="x", uuid="A"), rank(host="y", uuid="B")])
    assert kind == "host" and "share" in reason
    assert choose([rank(uuid="A", nvrtc=False), rank(uuid="A")])[0] == "host"
    assert choose([rank(uuid="A")] * 17)[0] == "host"
    # Forced.
    assert choose([rank(uuid="A", forced="host"), rank(uuid="B", forced="host")])[0] == "host"
    assert choose([rank(uuid="A", forced="ipc"), rank(uuid="B", forced="ipc")])[0] == "ipc"
    with pytest.raises(ringcc.InvalidArgumentError, match="Duplicate GPU detected"):
        choose([rank(uuid="A", forced="nccl"), rank(uuid="A", forced="nccl")])
    with pytest.raises(ringcc.InvalidArgumentError, match="NCCL was not found on rank.s. 1"):
        choose([rank(uuid="A", forced="nccl"), rank(uuid="B", nccl=False, forced="nccl")])
    with pytest.raises(ringcc.InvalidArgumentError, match="every rank on one host"):
        choose([rank(host="x", forced="ipc"), rank(host="y", forced="ipc")])
    with pytest.raises(ringcc.InvalidArgumentError, match="differs between ranks"):
        choose([rank(forced="ipc"), rank(forced="host")])
    with pytest.raises(ringcc.InvalidArgumentError, match="must be nccl, ipc or host"):
        choose([rank(forced="gloo")])


def test_a_peer_whose_device_work_stops_fails_the_others_after_the_timeout(ranks, fake_cuda, nvrtc):
    # Rank 1's "GPU" stops signalling (the stand-in drops its flag writes)
    # while rank 1 itself lives: the others' watchdogs see their collective
    # not complete within RINGCC_TIMEOUT_S, release their streams and raise.
    out_dir = ranks.scratch_dir("gpu-stall-ipc")
    env = {
        **fake_cuda,
        "RINGCC_TIMEOUT_S": "3",
        "RINGCC_GPU_BACKEND": "ipc",
        "RINGCC_NVRTC_LIB": nvrtc,
        "RINGCC_FAKE_CUDA_STALL_RANK": "1",
        "RINGCC_FAKE_CUDA_STALL_AFTER": "40",
    }
    command = ranks.command(
        3, [str(HERE / "gpu_deadpeer.py"), "--out", str(out_dir), "--victim", "-1"], ["--timeout", "60"]
    )
    completed = ranks.run(command, ranks.environment(env), 90)
    for rank in (0, 2):
        path = out_dir / f"outcome{rank}.json"
        assert path.exists(), f"rank {rank} reported nothing\n{completed.describe()}"
        outcome = json.loads(path.read_text())
        context = f"rank {rank}: {outcome}\n{completed.describe()}"
        assert outcome["class"] in ("PeerFailureError", "TimeoutError"), context
        assert "RINGCC_TIMEOUT_S" in outcome["message"] or "aborted" in outcome["message"], context
    assert completed.seconds < 40, completed.describe()


# --- under mpirun, RINGCC_TRANSPORT=mpi: the agreement over MPI --------------

MPI_CASES = (
    "allreduce_float32_*",
    "allreduce_int8_Average",
    "allgather_ragged",
    "alltoall_splits",
    "reduce_scatter_uneven",
    "host_tensor_against_cuda_tensors",
    "backend_as_expected",
)


@pytest.mark.parametrize("backend", ["ipc", "host"])
def test_device_collectives_agree_over_mpi(tmp_path, fake_cuda, request, backend):
    import test_mpi

    reason = test_mpi.skip_reason()
    if reason:
        pytest.skip(reason)
    env = {
        **fake_cuda,
        "RINGCC_TIMEOUT_S": "30",
        "RINGCC_TRANSPORT": "mpi",
        "RINGCC_GPU_BACKEND": backend,
        "RINGCC_TEST_EXPECT_BACKEND": backend,
        "RINGCC_NVRTC_LIB": request.getfixturevalue("nvrtc") if backend == "ipc" else "/nonexistent",
    }
    argv = [str(HERE / "rank_gpu_cases.py"), "--out", str(tmp_path), "--cases", ",".join(MPI_CASES)]
    completed = run_command(test_mpi.mpirun_command(2, argv), test_mpi.mpi_environment(env), 180)
    run = GroupRun(f"mpi-{backend}-2", 2, str(tmp_path), completed, read_results(str(tmp_path), 2))
    run.assert_clean_exit()
    names = [c.name for c in CASES.select(2, (), list(MPI_CASES))]
    assert len(names) >= 10
    for name in names:
        run.assert_case(name)


def test_compiled_kernels_are_cached_on_disk(tmp_path, fake_cuda, nvrtc):
    # The first process compiles with NVRTC and writes the image under
    # RINGCC_CACHE_DIR; the second reads it from there.
    code = textwrap.dedent("""
        import sys, numpy as np, ringcc
        sys.path.insert(0, sys.argv[1])
        import rank_gpu_cases as cases
        ringcc.init()
        cases.ringcc = ringcc
        x = cases.to_device(np.arange(8, dtype=np.float32))
        ringcc.allreduce_(x, prescale_factor=2.0)
        assert (x.host == 2 * np.arange(8)).all(), x.host
        print(ringcc.gpu_backend())
    """)
    env = rank_environment(
        {
            **fake_cuda,
            "RINGCC_NVRTC_LIB": nvrtc,
            "RINGCC_CACHE_DIR": str(tmp_path / "cache"),
            "RINGCC_LOG_LEVEL": "debug",
        }
    )
    origins = []
    for _ in range(2):
        completed = subprocess.run(
            [sys.executable, "-c", code, str(HERE)], env=env, capture_output=True, text=True, timeout=120
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout.strip() == "ipc"
        origins.append(re.search(r"device kernels for sm_90: (.*)", completed.stderr).group(1))
    assert "compiled by NVRTC" in origins[0], origins
    assert "disk cache" in origins[1], origins
    [image] = list((tmp_path / "cache" / "kernels").glob("*.cubin"))
    assert image.read_bytes()[:4] == b"\x7fELF"


def test_cpu_only_jobs_load_no_gpu_library(ranks, fake_cuda, nvrtc):
    # With every GPU library at hand, collectives of host memory (NumPy,
    # torch CPU tensors, the engine) never load any of them.
    code = textwrap.dedent("""
        import json, os, numpy as np, ringcc
        ringcc.init()
        x = np.ones(1000, np.float32)
        ringcc.allreduce_(x)
        ringcc.allgather(x)
        ringcc.synchronize(ringcc.allreduce_async_(x, name="cpu.x"))
        try:
            import torch
            ringcc.allreduce(torch.ones(10))
        except ImportError:
            pass
        def loaded():
            maps = open("/proc/self/maps").read()
            return [p for p in (os.environ["RINGCC_CUDA_LIB"], os.environ["RINGCC_NCCL_LIB"],
                                os.environ["RINGCC_NVRTC_LIB"]) if p in maps]
        print("LOADED", json.dumps(loaded()))
        # The check itself sees a library once one is loaded: a CUDA collective.
        import sys
        sys.path.insert(0, os.environ["CASES_DIR"])
        import rank_gpu_cases as cases
        cases.ringcc = ringcc
        ringcc.allreduce_(cases.to_device(np.ones(4, np.float32)))
        print("AFTER", json.dumps(loaded()))
        ringcc.shutdown()
    """)
    env = {
        **fake_cuda,
        "RINGCC_NCCL_LIB": fake_cuda["STANDIN_NCCL"],
        "RINGCC_NVRTC_LIB": nvrtc,
        "CASES_DIR": str(HERE),
    }
    command = ranks.command(2, ["-c", code])
    completed = ranks.run(command, ranks.environment(env), 120)
    assert completed.returncode == 0, completed.describe()
    before = [line for line in completed.stdout.splitlines() if "LOADED" in line]
    assert len(before) == 2 and all(line.endswith("LOADED []") for line in before), completed.describe()
    after = [line for line in completed.stdout.splitlines() if "AFTER" in line]
    assert len(after) == 2 and all(fake_cuda["RINGCC_CUDA_LIB"] in line for line in after), completed.describe()


@pytest.mark.parametrize("backend", ["ipc", "nccl", "host"])
def test_gpu_trace_records_every_phase(ranks, fake_cuda, request, tmp_path, backend):
    # RINGCC_GPU_TRACE=<prefix>: one JSON line per device collective and
    # rank, with the host phases and the device marks the backend placed
    # (the stand-in's "GPU timer" is the host clock); ringcc.bench.gpu_trace sums
    # them up.
    code = textwrap.dedent("""
        import os, sys, numpy as np, ringcc
        sys.path.insert(0, os.environ["CASES_DIR"])
        import rank_gpu_cases as cases
        ringcc.init()
        cases.ringcc = ringcc
        x = cases.to_device(np.ones(64, np.float32))
        for _ in range(6):
            ringcc.allreduce_(x)
        ringcc.barrier()
        ringcc.shutdown()
    """)
    prefix = str(tmp_path / "trace")
    env = {
        **fake_cuda,
        "RINGCC_GPU_BACKEND": backend,
        "RINGCC_GPU_TRACE": prefix,
        "CASES_DIR": str(HERE),
        "RINGCC_NVRTC_LIB": request.getfixturevalue("nvrtc"),
    }
    if backend == "nccl":
        env.update(RINGCC_NCCL_LIB=fake_cuda["STANDIN_NCCL"], RINGCC_FAKE_CUDA_GPU="per-rank")
    completed = ranks.run(ranks.command(2, ["-c", code]), ranks.environment(env), 120)
    assert completed.returncode == 0, completed.describe()
    marks = {
        "ipc": ["start", "area-free", "sent", "peers-ready", "reduced", "end"],
        "nccl": ["start", "end"],
        "host": ["start", "end"],
    }[backend]
    host = {
        "ipc": ["agreed", "enqueued"],
        "nccl": ["agreed", "nccl-enqueued", "enqueued"],
        "host": ["agreed", "previous-done", "on-host", "reduced-on-host", "enqueued"],
    }[backend]
    for rank in (0, 1):
        lines = (tmp_path / f"trace.rank{rank}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert len(records) == 6 and [r["call"] for r in records] == list(range(1, 7)), lines
        for r in records:
            assert (r["rank"], r["kind"], r["backend"], r["bytes"]) == (rank, "allreduce", backend, 256), r
            assert list(r["host_us"]) == host, r
            assert list(r["device_ns"]) == marks, r
            times = list(r["device_ns"].values())
            assert times == sorted(times) and times[0] > 0, r  # the stand-in runs them in order
            assert abs(times[0] - r["host_start_ns"]) < 60e9, r
    sys.path.insert(0, str(REPO))
    from ringcc.bench.gpu_trace import load, summarize

    text = "\n".join(summarize(load(prefix), skip=1))
    assert f"allreduce of 256 B on {backend}, 2 rank(s), median of 5 calls" in text, text
    if backend == "ipc":
        assert "device span, first rank's start to last rank's end" in text, text
