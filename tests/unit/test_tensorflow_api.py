"""ringcc's TensorFlow op library declares the part of TensorFlow's C API it
uses itself (plugins/tensorflow/tf_c_api.h) and finds it at run time. Here
those declarations are compiled against the real headers of the installed
tensorflow-cpu wheel (tensorflow/include; tests/unit/tensorflow_api/
check_declarations.cc static_asserts every constant, struct and
signature), a copy with a single difference must fail to compile, and the
built library must need no TensorFlow library at load (so one build serves
every TensorFlow of the tested range, with no compiler at install).
RINGCC_TF_INCLUDE names another TensorFlow's include directory (the lowest
tested version's: .ci/oldest-tensorflow)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elf_dynamic import read_dynamic

REPO = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).resolve().parent / "tensorflow_api" / "check_declarations.cc"


def tensorflow_include() -> Path:
    given = os.environ.get("RINGCC_TF_INCLUDE")
    if given:
        return Path(given)
    spec = importlib.util.find_spec("tensorflow")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tensorflow is not installed (pip install tensorflow-cpu): no headers to check against")
    include = Path(list(spec.submodule_search_locations)[0]) / "include"
    if not (include / "tensorflow" / "c" / "kernels.h").exists():
        pytest.skip(f"{include} holds no tensorflow/c/kernels.h")
    return include


def compiler():
    found = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not found:
        pytest.skip("no C++ compiler")
    return found


def compile_check(root=REPO):
    command = [
        compiler(),
        "-std=c++17",
        "-fsyntax-only",
        "-I",
        str(root),
        "-isystem",
        str(tensorflow_include()),
        str(CHECK),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_declarations_match_the_real_headers():
    completed = compile_check()
    assert completed.returncode == 0, completed.stderr[-6000:]


MUTATIONS = [
    ("X(TF_HALF, 19)", "X(TF_HALF, 20)", "TF_HALF"),
    ("X(TF_ABORTED, 10)", "X(TF_ABORTED, 11)", "TF_ABORTED"),
    (
        "X(TF_GetInput, void, (TF_OpKernelContext*, int, TF_Tensor**, TF_Status*))",
        "X(TF_GetInput, void, (TF_OpKernelContext*, int64_t, TF_Tensor**, TF_Status*))",
        "TF_GetInput",
    ),
    (
        "X(TF_OpKernelConstruction_GetAttrFloat, void, (TF_OpKernelConstruction*, const char*, float*, TF_Status*))",
        "X(TF_OpKernelConstruction_GetAttrFloat, void, (TF_OpKernelConstruction*, const char*, double*, TF_Status*))",
        "TF_OpKernelConstruction_GetAttrFloat",
    ),
    ("  const char* data;\n  size_t len;", "  size_t len;\n  const char* data;", "TF_StringView"),
]


@pytest.mark.parametrize("text,replacement,named", MUTATIONS, ids=[m[2] for m in MUTATIONS])
def test_a_wrong_declaration_fails_the_check(tmp_path, text, replacement, named):
    copy = tmp_path / "plugins" / "tensorflow"
    copy.mkdir(parents=True)
    original = (REPO / "plugins" / "tensorflow" / "tf_c_api.h").read_text()
    assert text in original, f"tf_c_api.h no longer contains {text!r}: update this test"
    (copy / "tf_c_api.h").write_text(original.replace(text, replacement))
    completed = compile_check(root=tmp_path)
    assert completed.returncode != 0, "the check compiled a wrong declaration"
    assert "static assert" in completed.stderr or "static_assert" in completed.stderr, completed.stderr[-3000:]
    assert named in completed.stderr, completed.stderr[-3000:]


def test_the_op_library_needs_no_tensorflow_library():
    import ringcc

    library = Path(ringcc._core.__file__).parent / "libringcc_tensorflow.so"
    if not library.exists():
        pytest.skip(f"this ringcc was built without its TensorFlow ops ({library} is missing)")
    dynamic = read_dynamic(library.read_bytes())
    needed = list(dynamic.needed)
    assert not [n for n in needed if "tensorflow" in n], needed
    assert not [n for n in needed if "stdc++" in n], f"the C++ runtime is linked in privately: {needed}"
    assert not dynamic.rpath and not dynamic.runpath, (dynamic.rpath, dynamic.runpath)
