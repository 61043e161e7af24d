"""A one-rank job (run by tests/unit/test_kernel_api.py): the C table that
framework kernels use (bindings/kernel_api.h), called through ctypes as
the TensorFlow ops call it: an allreduce whose input lies in segments, and
calls the table must refuse with a clear message (segmented or not). Prints one
JSON line."""

from __future__ import annotations

import ctypes
import json
import threading

import numpy as np

import ringcc
from ringcc import _core

DONE = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_int32,
    ctypes.c_char_p,
    ctypes.c_int64,
    ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int32,
)


class KernelCall(ctypes.Structure):
    # RingccKernelCall, field for field.
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("op", ctypes.c_int32),
        ("root", ctypes.c_int32),
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("in_", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("count", ctypes.c_int64),
        ("row_elems", ctypes.c_int64),
        ("out_count", ctypes.c_int64),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("ndim", ctypes.c_int32),
        ("send_counts", ctypes.POINTER(ctypes.c_int64)),
        ("n_send_counts", ctypes.c_int32),
        ("allocate", ctypes.c_void_p),
        ("allocate_ctx", ctypes.c_void_p),
        ("nudge", ctypes.c_int32),
        ("layout", ctypes.c_int64),
        ("segment_in", ctypes.POINTER(ctypes.c_void_p)),
        ("segment_count", ctypes.POINTER(ctypes.c_int64)),
        ("n_segments", ctypes.c_int32),
    ]


ENQUEUE = ctypes.CFUNCTYPE(None, ctypes.POINTER(KernelCall), DONE, ctypes.c_void_p)


class KernelApi(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("struct_size", ctypes.c_uint32), ("enqueue", ENQUEUE)]


ALLREDUCE, BROADCAST, FLOAT32, SUM = 1, 3, 2, 0


def call(api, name, kind, parts, count, out, segmented=True, counts=None):
    """Enqueues one call and waits for its completion: (error kind,
    message, result count). Segmented: `parts` are its segments (None for
    one without memory, of counts[i] elements); else parts[0] (or None) is
    its input."""
    finished = threading.Event()
    got = {}

    @DONE
    def done(_ctx, kind_, message, result_count, _recv, _n_recv):
        got.update(kind=kind_, message=(message or b"").decode(), count=result_count)
        finished.set()

    shape = (ctypes.c_int64 * 1)(count)
    ins = (ctypes.c_void_p * len(parts))(*[p.ctypes.data if p is not None else None for p in parts])
    counts = (ctypes.c_int64 * len(parts))(*(counts or [p.size if p is not None else 0 for p in parts]))
    c = KernelCall(
        name=name.encode(),
        kind=kind,
        dtype=FLOAT32,
        op=SUM,
        prescale=1.0,
        postscale=1.0,
        out=out.ctypes.data if out is not None else None,
        count=count,
        row_elems=1,
        out_count=count,
        shape=shape,
        ndim=1,
        nudge=1,
    )
    if segmented:
        c.segment_in, c.segment_count, c.n_segments = ins, counts, len(parts)
    elif parts and parts[0] is not None:
        c.in_ = parts[0].ctypes.data
    api.enqueue(ctypes.byref(c), done, None)
    if not finished.wait(60):
        return {"kind": "no completion within 60 s"}
    return got


def main() -> None:
    ringcc.init()
    api = ctypes.cast(ctypes.c_void_p(_core._kernel_api()), ctypes.POINTER(KernelApi)).contents
    parts = [np.arange(3, dtype=np.float32), np.full(4, 7.0, np.float32), np.array([-1.5], np.float32)]
    out = np.zeros(8, np.float32)
    report = {"version": api.version}
    report["good"] = call(api, "segments.good", ALLREDUCE, parts, 8, out)
    report["good_out"] = out.tolist()
    report["short"] = call(api, "segments.short", ALLREDUCE, parts, 9, np.zeros(9, np.float32))
    report["broadcast"] = call(api, "segments.broadcast", BROADCAST, parts, 8, np.zeros(8, np.float32))
    report["no_out"] = call(api, "segments.no_out", ALLREDUCE, parts, 8, None)
    # The rank goes on after the refusals.
    report["again"] = call(api, "segments.good", ALLREDUCE, parts[::-1], 8, out)
    report["again_out"] = out.tolist()
    # Calls a buggy kernel could make: refused with a message, no crash.
    report["no_input"] = call(api, "plain.no_input", ALLREDUCE, [None], 8, out, segmented=False)
    report["no_output"] = call(api, "plain.no_output", ALLREDUCE, [parts[1]], 4, None, segmented=False)
    report["bad_kind"] = call(api, "plain.bad_kind", 42, [parts[1]], 4, out, segmented=False)
    report["segment_without_input"] = call(
        api, "segments.without_input", ALLREDUCE, [parts[0], None], 7, out, counts=[3, 4]
    )
    report["plain"] = call(api, "plain.good", ALLREDUCE, [parts[1]], 4, out, segmented=False)
    report["plain_out"] = out[:4].tolist()
    ringcc.shutdown()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
