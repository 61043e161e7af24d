"""CUDA tensors in ringcc's NumPy-style API (ringcc.allreduce and friends):
which stream a collective runs on, and how results are allocated; and the
cheaper export of the framework tensors ringcc knows (fast_exporter, which
the core asks once per type of a DLPack object).

Stream: ``with ringcc.cuda_stream(s):`` (an int handle, or any object with
``cuda_stream``, ``ptr`` or ``__cuda_stream__``) sets it for the calling
thread; otherwise the producer framework's current stream (torch, CuPy);
otherwise CUDA's legacy default stream. The collective is enqueued on that
stream after the work already queued there, and the call returns without
waiting for the device (host staging excepted, which must wait).

Results that ringcc allocates (out-of-place calls without ``out=``) are of the
input's library where ringcc knows how (torch, CuPy), else a
``ringcc.DeviceArray`` (DLPack and ``__cuda_array_interface__``).
"""

import contextlib
import threading

LEGACY_STREAM = 1  # CU_STREAM_LEGACY; DLPack's number for the legacy default stream

_local = threading.local()


def _handle(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, cuda-python
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:  # the CUDA stream protocol: (version, handle)
        value = protocol() if callable(protocol) else protocol
        return int(value[1])
    raise TypeError(f"cannot find the CUDA stream handle of {stream!r}")


@contextlib.contextmanager
def cuda_stream(stream):
    """Runs this thread's collectives of CUDA tensors on `stream` (a handle,
    a torch.cuda.Stream, a cupy.cuda.Stream, ...) inside the block."""
    previous = getattr(_local, "stream", None)
    _local.stream = _handle(stream)
    try:
        yield
    finally:
        _local.stream = previous


def _library(tensor):
    return type(tensor).__module__.split(".")[0]


def consumer_stream(tensor, device):
    """The stream handle a collective of `tensor` runs on (see above)."""
    chosen = getattr(_local, "stream", None)
    if chosen is None:
        library = _library(tensor)
        try:
            if library == "torch":
                import torch

                chosen = torch.cuda.current_stream(device).cuda_stream
            elif library == "cupy":
                import cupy

                with cupy.cuda.Device(device):
                    chosen = cupy.cuda.get_current_stream().ptr
        except Exception:  # a framework without CUDA support at hand
            chosen = None
    if not chosen:  # 0 and None: the legacy default stream
        return LEGACY_STREAM
    return int(chosen)


def fast_exporter(cls):
    """For the core, once per type: a function that exports an object of
    `cls` as (DLPack capsule, stream handle or None for host memory), more
    cheaply than the object's __dlpack_device__ and __dlpack__, or returns
    None to leave it to them; None when ringcc knows no such way for `cls`.

    torch: torch._C._to_dlpack (what Tensor.__dlpack__ calls), and for a
    CUDA tensor the stream torch has current for its device, which is the
    one its pending work is on, so that nothing needs ordering. Tensors that
    __dlpack__ refuses (requiring grad, conjugated, not strided) and CUDA
    tensors under ringcc.cuda_stream() take the protocol's path."""
    if cls.__module__.split(".")[0] != "torch":
        return None
    import torch

    if cls not in (torch.Tensor, torch.nn.Parameter):
        return None  # subclasses may override __dlpack__ or __torch_function__
    to_dlpack = getattr(torch._C, "_to_dlpack", None)
    if to_dlpack is None:
        return None
    strided = torch.strided
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

    def current_stream(device):
        if raw_stream is not None:
            return raw_stream(device)
        return torch.cuda.current_stream(device).cuda_stream

    def export(tensor):
        if tensor.requires_grad or tensor.layout is not strided or tensor.is_conj():
            return None
        if not tensor.is_cuda:
            return (to_dlpack(tensor), None) if tensor.is_cpu else None
        if getattr(_local, "stream", None) is not None:
            return None
        return to_dlpack(tensor), current_stream(tensor.get_device()) or LEGACY_STREAM

    return export


def empty_like_library(tensor, shape, dtype, device):
    """A new array of `tensor`'s library, or None for ringcc's own."""
    library = _library(tensor)
    if library == "torch":
        import torch

        return torch.empty(tuple(shape), dtype=tensor.dtype, device=tensor.device)
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return cupy.empty(tuple(shape), dtype=tensor.dtype)
    return None
