"""ringcc declares the parts of the CUDA driver, NCCL and NVRTC APIs it uses
itself (core/device/*_api.h) and loads the libraries at run time. Here those
declarations are compiled against the real headers of NVIDIA's wheels for
CUDA 12 and 13 (tests/unit/device_api/check_declarations.cc static_asserts every
constant, struct and signature), and a copy with a single difference must
fail to compile, so the check can fail. No GPU is needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_wheels import include_dirs

REPO = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).resolve().parent / "device_api" / "check_declarations.cc"


def compiler():
    found = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not found:
        pytest.skip("no C++ compiler")
    return found


def compile_check(flavour, root=REPO):
    command = [compiler(), "-std=c++17", "-fsyntax-only", "-I", str(root)]
    for directory in include_dirs(flavour):
        command += ["-isystem", directory]
    command.append(str(CHECK))
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("flavour", ["cu12", "cu13"])
def test_declarations_match_the_real_headers(flavour):
    completed = compile_check(flavour)
    assert completed.returncode == 0, completed.stderr[-6000:]


# One difference of each kind the check must catch: (file, text, replacement, what the error names).
MUTATIONS = [
    (
        "cuda_api.h",
        "X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 33)",
        "X(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 34)",
        "CU_DEVICE_ATTRIBUTE_PCI_BUS_ID",
    ),
    (
        "cuda_api.h",
        "X(cuMemsetD32Async, CUresult, (CUdeviceptr, unsigned int, size_t, CUstream))",
        "X(cuMemsetD32Async, CUresult, (CUdeviceptr, int, size_t, CUstream))",
        "cuMemsetD32Async",
    ),
    (
        "cuda_api.h",
        "char reserved[kIpcHandleSize];\n};\nstruct CUipcEventHandle",
        "char reserved[kIpcHandleSize + 8];\n};\nstruct CUipcEventHandle",
        "CUipcMemHandle",
    ),
    ("nccl_api.h", "X(ncclAvg, 4)", "X(ncclAvg, 5)", "ncclAvg"),
    (
        "nccl_api.h",
        "X(ncclCommGetAsyncError, true, ncclResult_t, (ncclComm_t, ncclResult_t*))",
        "X(ncclCommGetAsyncError, true, ncclResult_t, (ncclComm_t, int*))",
        "ncclCommGetAsyncError",
    ),
    (
        "nccl_api.h",
        "  int splitShare = kNcclConfigUndefInt;",
        "  int padding = 0;\n  int splitShare = kNcclConfigUndefInt;",
        "splitShare",
    ),
    (
        "nvrtc_api.h",
        "X(nvrtcGetPTXSize, true, nvrtcResult, (nvrtcProgram, size_t*))",
        "X(nvrtcGetPTXSize, true, nvrtcResult, (nvrtcProgram, unsigned int*))",
        "nvrtcGetPTXSize",
    ),
]


@pytest.mark.parametrize("header,text,replacement,named", MUTATIONS, ids=[m[3] for m in MUTATIONS])
def test_a_wrong_declaration_fails_the_check(tmp_path, header, text, replacement, named):
    copy = tmp_path / "core" / "device"
    copy.mkdir(parents=True)
    for source in (REPO / "core" / "device").glob("*_api.h"):
        shutil.copy(source, copy / source.name)
    original = (copy / header).read_text()
    assert text in original, f"{header} no longer contains {text!r}: update this test"
    (copy / header).write_text(original.replace(text, replacement))
    completed = compile_check("cu13", root=tmp_path)
    assert completed.returncode != 0, "the check compiled a wrong declaration"
    assert "static assert" in completed.stderr or "static_assert" in completed.stderr, completed.stderr[-3000:]
    assert named in completed.stderr, completed.stderr[-3000:]
