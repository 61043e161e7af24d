"""--check-build: the frameworks, controllers, transports and run-time
libraries ringcc finds (the only part of ringrun that imports the core).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping

FRAMEWORKS = (("PyTorch", "torch"), ("JAX", "jax"), ("MXNet", "mxnet"))
TRANSPORTS = (("shm", "Shared memory"), ("tcp", "TCP"), ("mpi", "MPI"), ("nccl", "NCCL"))


def _framework_version(module: str) -> str | None:
    """The installed version of a framework's distribution, found without importing it."""
    distributions = [module]
    packages_distributions = getattr(importlib.metadata, "packages_distributions", None)
    if packages_distributions is not None:
        distributions = packages_distributions().get(module, []) + distributions
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _find_spec(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def format_build_report(build_info: Mapping, installed_frameworks: Mapping[str, str | None]) -> str:
    """The --check-build text. installed_frameworks maps a framework's label to its version, or None."""

    def mark(available: bool) -> str:
        return "[X]" if available else "[ ]"

    lines = [f"ringcc v{build_info.get('version', 'unknown')}:", "", "Available frameworks:"]
    for label, _ in FRAMEWORKS:
        if label in installed_frameworks:
            version = installed_frameworks[label]
            lines.append(f"    {mark(True)} {label}" + (f" {version}" if version else ""))
        else:
            lines.append(f"    {mark(False)} {label}")
    lines += ["", "Available controllers:", f"    {mark(True)} TCP store", "", "Available transports:"]
    transports = dict(build_info.get("transports", {}))
    for key, label in TRANSPORTS:
        lines.append(f"    {mark(bool(transports.pop(key, False)))} {label}")
    for key, available in transports.items():  # transports this launcher has no label for
        lines.append(f"    {mark(bool(available))} {key}")
    mpi = build_info.get("mpi")
    if mpi is not None:
        lines += [""] + format_mpi_report(mpi)
    libraries = build_info.get("gpu_libraries")
    if libraries is not None:
        lines += ["", "Run-time libraries (GPU):"]
        labels = (("cuda", "CUDA driver"), ("nccl", "NCCL"), ("nvrtc", "NVRTC"))
        for key, label in labels:
            library = libraries.get(key) or {}
            if library.get("found"):
                version = library.get("version")
                lines.append(f"    {mark(True)} {label} {version} ({library.get('path')})")
                if key == "cuda":
                    if library.get("initialized"):
                        for device in library.get("devices", []):
                            cc = ".".join(str(v) for v in device.get("compute_capability", ()))
                            mps = {True: ", MPS on", False: ", MPS off"}.get(device.get("mps"), "")
                            lines.append(
                                f"          cuda:{device.get('index')} {device.get('name')}, "
                                f"sm {cc}, {device.get('uuid')}, PCI {device.get('pci_bus_id')}{mps}"
                            )
                        if not library.get("devices"):
                            lines.append("          no CUDA device")
                    else:
                        lines.append(f"          unusable: {library.get('error', '').strip()}")
            else:
                hint = library.get("hint", "see RINGCC_" + key.upper() + "_LIB")
                lines.append(f"    {mark(False)} {label} (not found: {hint})")
    return "\n".join(lines) + "\n"


def _gpu_libraries_report() -> dict:
    """What ringcc.gpu_libraries finds of the CUDA driver, NCCL and NVRTC; a
    failure to look is reported as that, not as a broken core."""
    gpu_libraries = importlib.import_module("ringcc.gpu_libraries")
    report = {}
    try:
        cuda = gpu_libraries.cuda_info()
        report["nvrtc"] = cuda.pop("nvrtc")
        report["cuda"] = cuda
    except Exception as error:  # e.g. a driver that fails to list its devices
        report["cuda"] = {"found": True, "initialized": False, "error": str(error)}
    for key in ("nccl", "nvrtc"):
        if key not in report:
            try:
                report[key] = gpu_libraries.library_info(key)
            except Exception as error:
                report[key] = {"found": False, "hint": str(error)}
    return report


MPI_ABI_LABELS = {"openmpi": "Open MPI's ABI", "mpich": "the MPICH ABI", "mpiabi": "MPI's standard ABI"}


def format_mpi_report(mpi: Mapping) -> list[str]:
    """Which MPI library ringcc found at run time, and whether it can use it (ringcc.mpi_info())."""
    if mpi.get("built"):
        abi = MPI_ABI_LABELS.get(mpi.get("abi", ""), mpi.get("abi") or "unknown ABI")
        lines = [f"MPI: yes ({mpi.get('library') or 'unknown MPI'}, {abi})"]
        if mpi.get("libmpi"):
            lines.append(f"    library: {mpi['libmpi']} (found by: {mpi.get('found_by') or '?'})")
        lines.append(f"    plugin:  {mpi.get('plugin')}")
    else:
        lines = [f"MPI: no ({mpi.get('error') or 'not built'})"]
    tried = [line for line in str(mpi.get("tried") or "").splitlines() if line]
    if tried:
        lines.append("    passed over:")
        lines += [f"      {line}" for line in tried]
    return lines


def check_build() -> int:
    try:
        core = importlib.import_module("ringcc._core")
        build_info = dict(core.build_info())
        if hasattr(core, "mpi_info"):
            build_info["mpi"] = dict(core.mpi_info())
        if hasattr(core, "_gpu_library_info"):
            build_info["gpu_libraries"] = _gpu_libraries_report()
            # The NCCL backend is built in; it is available where NCCL is found.
            nccl = build_info["gpu_libraries"].get("nccl") or {}
            build_info.setdefault("transports", {})["nccl"] = bool(nccl.get("found"))
    except Exception as error:  # any failure here means: no usable core
        print(
            f"ringrun: cannot load the ringcc core (ringcc._core): {error}\n"
            f"ringrun: ringcc is not built or not installed for {sys.executable}",
            file=sys.stderr,
        )
        return 1
    installed = {label: _framework_version(module) for label, module in FRAMEWORKS if _find_spec(module)}
    sys.stdout.write(format_build_report(build_info, installed))
    return 0
