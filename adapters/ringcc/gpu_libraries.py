"""Where ringcc looks for the CUDA driver, NCCL and NVRTC at run time. None
of them is linked at build time, and none is loaded until a CUDA tensor (or
one of the queries below) needs it, so CPU-only users never load them.

Search order, for each library: ``RINGCC_CUDA_LIB`` / ``RINGCC_NCCL_LIB`` /
``RINGCC_NVRTC_LIB`` (a path); the ``nvidia-*`` wheels for CUDA 13 then 12
(``nvidia/cu13/lib``, ``nvidia/nccl/lib``, ``nvidia/cuda_nvrtc/lib``);
torch's bundled copies (``torch/lib``); the CUDA toolkit (``$CUDA_HOME``,
``$CUDA_PATH``, ``/usr/local/cuda``); then the system's search path. The
driver itself (``libcuda.so.1``) comes with the NVIDIA driver, never a
wheel. Nothing here imports torch.
"""

import functools
import glob
import importlib.util
import os

NCCL_SONAME = "libnccl.so.2"
INSTALL_HINT = (
    "pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12), or point RINGCC_NCCL_LIB at a libnccl.so.2"
)

LIBRARIES = ("cuda", "nccl", "nvrtc")


def _package_dirs(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return list(spec.submodule_search_locations or [])


def _existing(paths):
    seen, out = set(), []
    for path in paths:
        if path not in seen and os.path.exists(path):
            seen.add(path)
            out.append(path)
    return out


def package_candidates(library):
    """The library files that installed Python packages provide, in order."""
    paths = []
    nvidia = _package_dirs("nvidia")
    torch = _package_dirs("torch")
    if library == "nccl":
        paths += [os.path.join(root, "nccl", "lib", NCCL_SONAME) for root in nvidia]
        paths += [os.path.join(root, "lib", NCCL_SONAME) for root in torch]
    elif library == "nvrtc":
        for root in nvidia:
            paths.append(os.path.join(root, "cu13", "lib", "libnvrtc.so.13"))
            paths.append(os.path.join(root, "cuda_nvrtc", "lib", "libnvrtc.so.12"))
        for root in torch:  # older torch wheels bundle a renamed NVRTC
            paths += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc*.so*")))
        paths = [p for p in paths if "builtins" not in os.path.basename(p)]
    return _existing(paths)


@functools.cache
def _configured():
    from ringcc import _core

    for library in LIBRARIES:
        _core._set_gpu_library_dirs(library, package_candidates(library))
    return _core


def configure():
    """Hands the packages' candidates to the core (once per process)."""
    return _configured()


def nccl_candidates():
    """Every libnccl.so.2 candidate, in the order tried."""
    return list(configure()._gpu_library_candidates("nccl"))


def library_info(library):
    """{"found", "path", "version", "version_code", "error", "tried", "hint"} for
    "cuda", "nccl" or "nvrtc"; searched once per process."""
    return dict(configure()._gpu_library_info(library))


def nccl_info():
    """What ringcc found of NCCL: {"found", "path", "version" ("2.28.9"),
    "version_code", "error", "tried", "hint"}."""
    return library_info("nccl")


def nccl_built():
    """NCCL's version code (e.g. 22809) when a usable libnccl.so.2 was found, else 0."""
    return nccl_info()["version_code"]


def cuda_info():
    """What ringcc found of CUDA: {"found" (the driver library loaded), "path",
    "version" (the CUDA version the driver supports, "13.0"), "version_code",
    "initialized" (cuInit succeeded), "error", "devices": [{"index", "name",
    "uuid", "pci_bus_id", "compute_capability", "multiprocessors",
    "total_memory", "mps" (processes share the device through NVIDIA's MPS:
    True or False; None where the driver does not say)}], "nvrtc":
    library_info("nvrtc")}."""
    info = dict(configure()._cuda_info())
    info["nvrtc"] = library_info("nvrtc")
    return info


def gpu_tensor_message(what):
    """Why a CUDA tensor cannot be used here, and what to install."""
    info = library_info("cuda")
    if not info["found"]:
        return (
            f"{what} lives on a CUDA device, but the CUDA driver (libcuda.so.1) was not found: "
            f"{info['hint']}. Tried:\n{info['error'].rstrip()}"
        )
    return f"{what} lives on a CUDA device: {info['error'] or 'the CUDA driver is unusable'}"
