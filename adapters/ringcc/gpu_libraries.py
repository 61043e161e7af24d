"""Where ringcc looks for NCCL at run time (it is never linked at build time).

Search order: ``RINGCC_NCCL_LIB`` (a path), the ``nvidia-nccl-cu13`` and
``nvidia-nccl-cu12`` wheels (``nvidia/nccl/lib``), the copy inside torch,
then the system's ``libnccl.so.2``. Nothing here imports torch.
"""
import functools
import importlib.util
import os

NCCL_SONAME = "libnccl.so.2"
INSTALL_HINT = ("pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12), "
                "or point RINGCC_NCCL_LIB at a libnccl.so.2")


def _package_dirs(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    return list(spec.submodule_search_locations or [])


def nccl_candidates():
    """The libraries to try, in order."""
    candidates = []
    explicit = os.environ.get("RINGCC_NCCL_LIB")
    if explicit:
        candidates.append(explicit)
    for root in _package_dirs("nvidia"):  # the nvidia-nccl-cu12/-cu13 wheels
        path = os.path.join(root, "nccl", "lib", NCCL_SONAME)
        if os.path.exists(path):
            candidates.append(path)
    for root in _package_dirs("torch"):  # torch wheels that bundle NCCL
        path = os.path.join(root, "lib", NCCL_SONAME)
        if os.path.exists(path):
            candidates.append(path)
    candidates.append(NCCL_SONAME)  # the system's search path
    return candidates


@functools.lru_cache(maxsize=None)
def nccl_info():
    """{"found", "path", "version" ("2.28.9"), "version_code", "error"}; searched once."""
    from ringcc import _core
    return dict(_core._find_nccl(nccl_candidates()))


def nccl_built():
    """NCCL's version code (e.g. 22809) when a usable libnccl.so.2 was found, else 0."""
    return nccl_info()["version_code"]


def gpu_tensor_message(what):
    """Why a GPU tensor cannot be used, and what to do."""
    info = nccl_info()
    if not info["found"]:
        return (f"{what} lives on a CUDA device, and GPU collectives need NCCL, which was not found: "
                f"{INSTALL_HINT}. Tried:\n{info['error'].rstrip()}")
    return (f"{what} lives on a CUDA device: NCCL {info['version']} was found at {info['path']}, but this "
            f"ringcc version runs collectives on host memory only; copy the tensor to the CPU first")
