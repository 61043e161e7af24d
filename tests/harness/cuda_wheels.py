"""NVIDIA's CUDA wheels (headers and NVRTC) for the tests that need no GPU:
downloaded with pip once into a cache directory (RINGCC_TEST_WHEEL_CACHE,
else <tmp>/ringcc-cuda-wheels) and unpacked there. A test that needs them is
skipped, saying so, only when the package index cannot be reached; any other
download failure fails it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import urllib.parse
import zipfile
from pathlib import Path

import pytest

# For each CUDA major version: the wheels whose headers declare what ringcc
# uses (cuda.h: nvidia-cuda-runtime; nccl.h: nvidia-nccl; nvrtc.h and the
# library: nvidia-cuda-nvrtc), plus those cuda_runtime.h includes when
# nccl.h pulls it in (crt/host_config.h: nvcc's or crt's; nv/target: cccl).
WHEELS: dict[str, list[str]] = {
    "cu12": [
        "nvidia-cuda-runtime-cu12",
        "nvidia-cuda-nvcc-cu12",
        "nvidia-cuda-cccl-cu12",
        "nvidia-nccl-cu12",
        "nvidia-cuda-nvrtc-cu12",
    ],
    "cu13": [
        "nvidia-cuda-runtime==13.*",
        "nvidia-cuda-crt==13.*",
        "nvidia-cuda-cccl==13.*",
        "nvidia-nccl-cu13",
        "nvidia-cuda-nvrtc==13.*",
    ],
}


def cache_dir() -> Path:
    root = os.environ.get("RINGCC_TEST_WHEEL_CACHE") or os.path.join(tempfile.gettempdir(), "ringcc-cuda-wheels")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _index_reachable() -> bool:
    url = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
    parsed = urllib.parse.urlparse(url)
    host = parsed.hostname or "pypi.org"
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except OSError:
        return False


def download(flavour: str) -> Path:
    """The unpacked wheels of `flavour` ("cu12" or "cu13"); returns the
    directory that holds their nvidia/ tree."""
    target = cache_dir() / flavour
    done = target / ".complete"
    if done.exists():
        return target / "unpacked"
    wheels = target / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    have = sorted(p.name for p in wheels.glob("*.whl"))
    if len(have) < len(WHEELS[flavour]):
        if not _index_reachable():
            pytest.skip(
                f"the package index is unreachable, so the {flavour} CUDA wheels "
                f"({', '.join(WHEELS[flavour])}) cannot be downloaded"
            )
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--quiet",
                "-d",
                str(wheels),
                *WHEELS[flavour],
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert completed.returncode == 0, f"pip download failed:\n{completed.stdout}\n{completed.stderr}"
    unpacked = target / "unpacked"
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                # Headers, and NVRTC's libraries (the tests compile with it).
                if "/include/" in member or ("nvrtc" in wheel.name and "/lib/" in member):
                    archive.extract(member, unpacked)
    done.write_text("\n".join(sorted(p.name for p in wheels.glob("*.whl"))))
    return unpacked


def include_dirs(flavour: str) -> list[str]:
    root = download(flavour) / "nvidia"
    return sorted(str(p) for p in root.glob("*/include") if p.is_dir())


def nvrtc_library(flavour: str) -> str:
    root = download(flavour) / "nvidia"
    for pattern in ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12"):
        for path in root.glob(pattern):
            return str(path)
    raise AssertionError(f"no NVRTC library in the {flavour} wheels under {root}")
