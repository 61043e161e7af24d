"""The extension declares the part of DLPack's ABI it uses itself
(bindings/dlpack.h: DLDevice, DLDataType, DLTensor, DLManagedTensor and the
device and type codes it reads and writes), since it exchanges these structs
with other libraries through capsules. Here those declarations are compiled
against DLPack's own dlpack.h, as torch ships it (ATen/dlpack.h: from the
installed torch, else from torch's wheel, downloaded, never installed):
tests/unit/dlpack_abi/check_declarations.cc static_asserts every size, offset and
value, and a copy with a single difference must fail to compile, so the
check can fail. No framework runs."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from wheel_downloads import download_wheels

REPO = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).resolve().parent / "dlpack_abi" / "check_declarations.cc"
OURS = REPO / "bindings" / "dlpack.h"
# torch's wheel keeps DLPack's header here; the version the tests use.
IN_WHEEL = "torch/include/ATen/dlpack.h"
TORCH = "torch==2.13.0"


def compiler() -> str:
    found = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not found:
        pytest.skip("no C++ compiler")
    return found


def installed_header() -> Path | None:
    try:
        import torch
    except ImportError:
        return None
    header = Path(torch.__file__).resolve().parent / "include" / "ATen" / "dlpack.h"
    return header if header.is_file() else None


@pytest.fixture(scope="module")
def dlpack_include(tmp_path_factory) -> Path:
    """A directory holding DLPack's header as dlpack/dlpack.h (its path in
    DLPack's own repository)."""
    root = tmp_path_factory.mktemp("dlpack")
    target = root / "include" / "dlpack" / "dlpack.h"
    target.parent.mkdir(parents=True)
    header = installed_header()
    if header is not None:
        shutil.copy(header, target)
    else:
        (wheel,) = download_wheels(root / "wheels", [TORCH]).glob("torch-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            if IN_WHEEL not in archive.namelist():
                pytest.fail(f"{wheel.name} has no {IN_WHEEL}")
            target.write_bytes(archive.read(IN_WHEEL))
    assert "DLPACK_MAJOR_VERSION" in target.read_text(), f"{target} is not DLPack's header"
    return root / "include"


def compile_check(include: Path, root: Path = REPO) -> subprocess.CompletedProcess:
    command = [compiler(), "-std=c++17", "-fsyntax-only", "-I", str(root), "-isystem", str(include), str(CHECK)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_declarations_match_dlpack(dlpack_include):
    completed = compile_check(dlpack_include)
    assert completed.returncode == 0, completed.stderr[-6000:]


# One difference of each kind the check must catch: (text, replacement, what the error names).
MUTATIONS = [
    ("  int32_t ndim;\n  DLDataType dtype;\n", "  DLDataType dtype;\n  int32_t ndim;\n", "DLTensor::ndim"),
    ("  uint16_t lanes;", "  uint8_t lanes;", "DLDataType::lanes"),
    ("  uint64_t byte_offset;", "  int64_t byte_offset;", "DLTensor::byte_offset"),
    ("  void* manager_ctx;\n", "  void* manager_ctx;\n  void* padding;\n", "DLManagedTensor::deleter"),
    ("kDLCUDAManaged = 13", "kDLCUDAManaged = 12", "kDLCUDAManaged"),
    ("kDLBfloat = 4", "kDLBfloat = 5", "kDLBfloat"),
]


@pytest.mark.parametrize("text,replacement,named", MUTATIONS, ids=[m[2] for m in MUTATIONS])
def test_a_wrong_declaration_fails_the_check(dlpack_include, tmp_path, text, replacement, named):
    copy = tmp_path / "bindings" / "dlpack.h"
    copy.parent.mkdir(parents=True)
    original = OURS.read_text()
    assert text in original, f"bindings/dlpack.h no longer contains {text!r}: update this test"
    copy.write_text(original.replace(text, replacement))
    completed = compile_check(dlpack_include, root=tmp_path)
    assert completed.returncode != 0, "the check compiled a wrong declaration"
    assert "static assert" in completed.stderr or "static_assert" in completed.stderr, completed.stderr[-3000:]
    assert named in completed.stderr, completed.stderr[-3000:]
