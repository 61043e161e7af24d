"""The CUDA driver, NCCL and NVRTC are found at run time, never linked:
RINGCC_*_LIB, the nvidia-* wheels, torch's copies, the toolkit, then the
system's. These run on machines without a GPU (CI has none): a stand-in
libnccl.so.2 (built here with the C compiler) shows what is reported when
one is found; a missing one gives the documented message, and a CUDA tensor
(a DLPack producer that says it lives on a CUDA device) without a CUDA
driver says what to install."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from rank_groups import rank_environment

PROBE = textwrap.dedent(
    """
    import ctypes, json
    import numpy as np
    import ringcc

    class CudaArray:
        # DLPack producer whose tensor claims device type 2 (kDLCUDA).
        def __init__(self):
            self.host = np.ones(3, np.float32)

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            capsule = self.host.__dlpack__()
            get = ctypes.pythonapi.PyCapsule_GetPointer
            get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
            # DLTensor: void* data, then DLDevice {int32 device_type, int32 device_id}
            ctypes.c_int32.from_address(get(capsule, b"dltensor") + 8).value = 2
            return capsule

    ringcc.init()
    try:
        ringcc.allreduce(CudaArray())
        error = None
    except ringcc.RingccError as caught:
        error = [type(caught).__name__, str(caught)]
    print(json.dumps({"built": ringcc.nccl_built(), "info": ringcc.nccl_info(), "error": error,
                      "cuda": ringcc.cuda_info()}))
    """
)

# What ringcc requires of a libnccl.so.2 (core/device/nccl_api.h): the stand-in
# defines each (doing nothing) and answers ncclGetVersion.
NCCL_REQUIRED = [
    "ncclGetErrorString",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclCommCount",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
]
FAKE_NCCL = "int ncclGetVersion(int* version) { *version = 22809; return 0; }\n" + "".join(
    f"int {name}(void) {{ return 0; }}\n" for name in NCCL_REQUIRED
)


def probe(**env):
    environment = rank_environment({"RINGCC_RANK": "0", "RINGCC_SIZE": "1", **env})
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], env=environment, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.splitlines()[-1])


def check_build(**env):
    completed = subprocess.run(
        [sys.executable, "-m", "ringcc.launcher", "--check-build"],
        env=rank_environment(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_missing_nccl_says_what_to_install(tmp_path):
    missing = str(tmp_path / "nowhere" / "libnccl.so.2")
    result = probe(RINGCC_NCCL_LIB=missing)
    if result["info"]["found"]:
        pytest.skip(f"this machine has NCCL at {result['info']['path']}")
    assert result["built"] == 0
    assert missing in result["info"]["error"] and result["info"]["tried"][0] == missing
    assert "[ ] NCCL (not found: pip install nvidia-nccl" in check_build(RINGCC_NCCL_LIB=missing)


def test_a_cuda_tensor_without_a_cuda_driver_says_what_to_install(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcuda.so.1")
    result = probe(RINGCC_CUDA_LIB=missing)
    if result["cuda"]["found"]:
        pytest.skip(f"this machine has a CUDA driver at {result['cuda']['path']}")
    assert result["cuda"]["devices"] == [] and missing in result["cuda"]["error"]
    name, message = result["error"]
    assert name == "InvalidArgumentError"
    assert "CUDA device" in message and "libcuda.so.1" in message and "RINGCC_CUDA_LIB" in message
    assert "install an NVIDIA driver" in message
    assert "[ ] CUDA driver (not found: install an NVIDIA driver" in check_build(RINGCC_CUDA_LIB=missing)


@pytest.fixture(scope="module")
def fake_nccl(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build a stand-in libnccl.so.2")
    directory = tmp_path_factory.mktemp("nccl")
    source = directory / "nccl.c"
    source.write_text(FAKE_NCCL)
    library = directory / "libnccl.so.2"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, timeout=60)
    return str(library)


def test_nccl_from_ringcc_nccl_lib_is_reported_with_its_version(fake_nccl):
    result = probe(RINGCC_NCCL_LIB=fake_nccl)
    assert result["built"] == 22809
    assert result["info"]["found"] and result["info"]["path"] == fake_nccl and result["info"]["version"] == "2.28.9"
    assert f"[X] NCCL 2.28.9 ({fake_nccl})" in check_build(RINGCC_NCCL_LIB=fake_nccl)


def test_a_library_without_nccl_get_version_is_passed_over(tmp_path, fake_nccl):
    compiler = shutil.which("cc") or shutil.which("gcc")
    impostor = tmp_path / "libnotnccl.so"
    source = tmp_path / "impostor.c"
    source.write_text("int something_else(void) { return 0; }\n")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(impostor), str(source)], check=True, timeout=60)
    result = probe(RINGCC_NCCL_LIB=str(impostor))
    assert f"{impostor}: loaded, but has no ncclGetVersion" in result["info"]["error"] or result["info"]["found"]
    assert result["info"]["path"] != str(impostor)


def test_a_library_missing_a_required_nccl_function_is_passed_over(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler")
    old = tmp_path / "libnccl.so.2"
    source = tmp_path / "old.c"
    source.write_text("int ncclGetVersion(int* v) { *v = 2604; return 0; }\n")  # NCCL 2.6: no ncclSend
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(old), str(source)], check=True, timeout=60)
    result = probe(RINGCC_NCCL_LIB=str(old))
    assert f"{old}: loaded, but has no ncclGetErrorString" in result["info"]["error"] or result["info"]["found"]
    assert result["info"]["path"] != str(old)
