"""ringcc's TensorFlow ops: the op library, the collectives on tf.Tensors,
their gradients and their errors.

The op library (libringcc_tensorflow.so, beside ringcc._core, built from
plugins/tensorflow/ with no TensorFlow header) is loaded with
tf.load_op_library: it finds TensorFlow's C API in the process and
registers the ops RingccAllreduce, RingccPackedAllreduce, RingccAllgather,
RingccBroadcast, RingccReducescatter (each over N tensors) and
RingccAlltoall, with asynchronous CPU kernels that hand the tensors'
memory to ringcc's background engine as named collectives. They run
eagerly and inside tf.function alike. See docs/tensorflow.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import threading
import zlib

import numpy as np
import tensorflow as tf

import ringcc
from ringcc import _core, thread_names
from ringcc.elastic import HorovodInternalError
from ringcc.failed_calls import error_text
from ringcc.horovod_basics import Adasum, Average, Max, Min, Product, Sum  # noqa: F401  (re-exported)

LIBRARY = os.path.join(os.path.dirname(_core.__file__), "libringcc_tensorflow.so")


def _load():
    if not os.path.exists(LIBRARY):
        raise ImportError(f"ringcc.tensorflow: {LIBRARY} is missing: this ringcc was built without its TensorFlow ops")
    module = tf.load_op_library(LIBRARY)
    lib = ctypes.CDLL(LIBRARY)  # the same handle: the library is loaded once
    lib.ringcc_tf_load_error.restype = ctypes.c_char_p
    error = lib.ringcc_tf_load_error()
    if error:
        raise ImportError(f"ringcc.tensorflow: {error.decode()} (TensorFlow {tf.__version__})")
    lib.ringcc_tf_bind.argtypes = [ctypes.c_void_p]
    lib.ringcc_tf_bind.restype = ctypes.c_int
    if lib.ringcc_tf_bind(_core._kernel_api()) != 0:
        raise ImportError(f"ringcc.tensorflow: {LIBRARY} does not match ringcc._core ({_core.__file__})")
    return module


_lib = _load()

# The kernel ops on the global process set: collectives the engine matches
# by name across ranks, in whatever order each rank starts them.
_OPS_BY_NAME = (
    "RingccAllreduce",
    "RingccPackedAllreduce",
    "RingccAllgather",
    "RingccBroadcast",
    "RingccReducescatter",
    "RingccAlltoall",
)


def _run_as_ready(op_types) -> bool:
    """Lets a tf.function run these ops as their inputs become ready, as a
    graph does: TensorFlow chains every stateful op of a function that
    touches no resource in program order (automatic control dependencies),
    which would run a step's collectives one after another, each waiting
    for the engine to finish the one before, so that they could neither
    fuse nor overlap the computation still running. Added to the list
    TensorFlow keeps of stateful ops whose order does not matter, they stay
    stateful (never pruned, merged or constant-folded) and still run
    before the function returns. False where this TensorFlow has no such
    list (the ops then stay in program order)."""
    try:
        from tensorflow.python.framework import auto_control_deps
    except ImportError:
        return False
    known = getattr(auto_control_deps, "MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS", None)
    if not isinstance(known, (frozenset, set)):
        return False
    auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = frozenset(known) | frozenset(op_types)
    return True


RUN_AS_READY = _run_as_ready(_OPS_BY_NAME)

# The dtypes the core moves; others are converted around the collective.
_CORE_DTYPES = {tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.uint8, tf.int32, tf.int64}

# --------------------------------------------------------------------------
# Errors


class _TFErrorMixin:
    """Base of the classes an op's failure is raised as in eager code: at
    once ringcc's class, TensorFlow's class for the status code and, for
    failures of the job, HorovodInternalError."""


_TF_CLASS = {
    "ringcc.MismatchError": tf.errors.InvalidArgumentError,
    "ringcc.InvalidArgumentError": tf.errors.InvalidArgumentError,
    "ringcc.UnsupportedTypeError": tf.errors.UnimplementedError,
    "ringcc.PeerFailureError": tf.errors.AbortedError,
    "ringcc.TimeoutError": tf.errors.DeadlineExceededError,
    "ringcc.NotInitializedError": tf.errors.FailedPreconditionError,
    "ringcc.InternalError": tf.errors.InternalError,
}
_JOB_FAILURES = ("ringcc.MismatchError", "ringcc.PeerFailureError", "ringcc.InternalError")
_combined: dict = {}


def _class_for(ringcc_name: str):
    if ringcc_name in _combined:
        return _combined[ringcc_name]
    ringcc_cls = getattr(_core, ringcc_name.split(".", 1)[1], None)
    tf_cls = _TF_CLASS.get(ringcc_name)
    cls = None
    if ringcc_cls is not None and tf_cls is not None:
        bases = (tf_cls, ringcc_cls) + ((HorovodInternalError,) if ringcc_name in _JOB_FAILURES else ())
        try:
            cls = type(
                ringcc_cls.__name__,
                bases,
                {"__module__": "ringcc.tensorflow", "__doc__": ringcc_cls.__doc__, "__init__": _error_init},
            )
        except TypeError:  # Python cannot lay out the combination
            cls = None
    _combined[ringcc_name] = cls
    return cls


def _error_init(self, node_def, op, message, *args):
    tf.errors.OpError.__init__(self, node_def, op, message, _TF_CODE[type(self).__mro__[1]])


_TF_CODE = {
    tf.errors.InvalidArgumentError: tf.errors.INVALID_ARGUMENT,
    tf.errors.UnimplementedError: tf.errors.UNIMPLEMENTED,
    tf.errors.AbortedError: tf.errors.ABORTED,
    tf.errors.DeadlineExceededError: tf.errors.DEADLINE_EXCEEDED,
    tf.errors.FailedPreconditionError: tf.errors.FAILED_PRECONDITION,
    tf.errors.InternalError: tf.errors.INTERNAL,
}


def ringcc_class_name(error: BaseException) -> str | None:
    """The ringcc class an op's TensorFlow error carries ("ringcc.MismatchError"), or None."""
    message = getattr(error, "message", None) or str(error)
    for name in _TF_CLASS:
        if message.startswith(name + ":") or (name + ": ") in message:
            return name
    return None


def convert_error(error: BaseException) -> BaseException:
    """A TensorFlow error raised by one of ringcc's ops, as an instance of a
    class that is also the ringcc error it carries (and HorovodInternalError
    for failures of the job); other errors as they are."""
    if not isinstance(error, tf.errors.OpError) or isinstance(error, _core.RingccError):
        return error
    name = ringcc_class_name(error)
    cls = _class_for(name) if name else None
    if cls is None:
        return error
    message = error.message
    start = message.find(name + ": ")
    if start > 0:
        message = message[start:]
    converted = cls(error.node_def, error.op, message)
    return converted


def _run(fn, *args, **kwargs):
    """Calls an op wrapper; eager failures come back as ringcc's classes."""
    try:
        return fn(*args, **kwargs)
    except tf.errors.OpError as error:
        raise convert_error(error) from None


# --------------------------------------------------------------------------
# Names

_counter_lock = threading.Lock()
_counters: dict = {}


def _op_value(op) -> int:
    if op is None:
        return Average
    if op == Adasum:
        raise NotImplementedError("ringcc does not implement Adasum")
    if isinstance(op, str):
        return ringcc._op(op)
    return int(op)


def engine_name(kind: str, name: str | None) -> str:
    """The engine's name of a collective: `<kind>.<name>`, or "" to let the
    kernel take its node's name (unique in a graph, the same on every rank
    that built the same graph; the op's type when it runs eagerly, where
    ops run one at a time in program order; see _call_name for threads)."""
    if name:
        return f"{kind}.{name}"
    return ""


def _call_name(name: str | None) -> str | None:
    """The name a call goes by: its own, else, for an eager call from a
    thread other than the main one, `noname.<thread name>.<n>`
    (ringcc.thread_names), so that two threads calling at once pair with
    the same threads of their peers rather than share the op's type as a
    name; else None."""
    if name or not tf.executing_eagerly():
        return name or None
    in_thread = thread_names.thread_name_part()
    return f"noname.{in_thread}" if in_thread is not None else None


def _nudge() -> bool:
    # The kernel starts the engine's next cycle once it has enqueued its
    # tensors (a grouped op: all of them), as a caller that waits for them
    # does, instead of leaving them for the cycle time: its executor (or its
    # eager caller) waits for this op.
    return True


def _wire_dtype(dtype, reducing: bool):
    """The dtype a tensor of `dtype` travels as (None: as it is)."""
    if dtype in _CORE_DTYPES:
        return None
    if dtype in (tf.int16, tf.uint16):
        return tf.int32
    if dtype in (tf.uint32, tf.uint64):
        return tf.int64
    if dtype == tf.bool:
        return None if reducing else tf.uint8
    return None


def _to_wire(tensor, reducing: bool):
    wire = _wire_dtype(tensor.dtype, reducing)
    return (tf.cast(tensor, wire), tensor.dtype) if wire is not None else (tensor, None)


def _from_wire(tensor, dtype):
    return tf.cast(tensor, dtype) if dtype is not None else tensor


# --------------------------------------------------------------------------
# The collectives on tensors (the global process set)


class _InOrder:
    """The ops of one grouped call, each (in a graph) after the one before:
    a rank whose packs or dtypes differ from its peers' fails on the first
    op they share, and TensorFlow then runs none of the later ones, so that
    no collective of the group waits in the engine for peers that will never
    start it (docs/tensorflow.md, "Fusion"). Ops of separate calls run as
    their inputs become ready (_run_as_ready)."""

    def __init__(self):
        self._last = None

    def run(self, fn, **kwargs):
        if self._last is None or tf.executing_eagerly():
            out = _run(fn, **kwargs)
        else:
            with tf.control_dependencies([self._last]):
                out = _run(fn, **kwargs)
        first = out[0] if isinstance(out, (list, tuple)) else out
        if not tf.executing_eagerly():
            self._last = first.op
        return out


def _by_dtype(tensors, run_group, name):
    """run_group(tensors_of_one_dtype, name) for each dtype among `tensors`
    (an op's tensors share one dtype), the results in the order given."""
    groups: dict = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    if len(groups) == 1:
        return run_group(tensors, name)
    out = [None] * len(tensors)
    for dtype, indices in groups.items():
        part = run_group([tensors[i] for i in indices], f"{name}.{dtype.name}" if name else None)
        for i, r in zip(indices, part):
            out[i] = r
    return out


# A grouped allreduce of at least this many tensors, their shapes known
# while tracing, travels packed: see _packed().
PACK_MIN_TENSORS = 8


def _fusion_threshold() -> int:
    # The job's, as the ranks compared it when they met: every rank cuts the
    # same packs.
    return max(1, int(_core.fusion_threshold()))


def _packable(tensors) -> bool:
    return len(tensors) >= PACK_MIN_TENSORS and all(t.shape.is_fully_defined() for t in tensors)


def _packs(tensors) -> list[list[int]]:
    """The indices of `tensors` in packs of at most the fusion threshold's
    bytes, in order (a tensor larger than that is a pack of its own)."""
    limit = _fusion_threshold()
    packs: list[list[int]] = []
    filled = limit
    for i, t in enumerate(tensors):
        nbytes = t.shape.num_elements() * t.dtype.size
        if filled + nbytes > limit:
            packs.append([])
            filled = 0
        packs[-1].append(i)
        filled += nbytes
    return packs


# The low 32 bits of a pack's layout: its index and its group's number of
# packs, 16 bits each (report_missing in plugins/tensorflow/tf_op_library.cc
# reads them).
_PACK_BITS = 16
_PACK_MASK = (1 << _PACK_BITS) - 1


def _layout(tensors, pack: int, packs: int, group: int) -> tuple[int, str]:
    """The layout of the `pack`-th of a group's `packs` packs (the group
    holding `group` tensors): a 63-bit digest of the pack's shapes and
    dtype, the group's length and its number of packs, whose low 32 bits
    are the pack's index and the number of packs: ranks whose groups
    differ fail on the first pack, which they share, and the kernel of a
    group's first pack knows it is first; and the start of their
    description for an error."""
    shapes = [t.shape.as_list() for t in tensors]
    text = f"{group}:{packs};" + ";".join(f"{t.dtype.name}{shape}" for t, shape in zip(tensors, shapes))
    digest = (zlib.crc32(text.encode()) << 31) | (zlib.adler32(text.encode()) & 0x7FFFFFFF)
    place = (pack << _PACK_BITS) | packs if packs <= _PACK_MASK else 0
    layout = ((digest >> 2 * _PACK_BITS) << 2 * _PACK_BITS) | place or 1
    more = " ..." if len(tensors) > 8 else ""
    where = f"; pack {pack + 1} of {packs}, a group of {group} tensors" if packs > 1 else ""
    return layout, f"{len(tensors)} tensors of {tensors[0].dtype.name} packed, shapes {shapes[:8]}{more}{where}"


def _group_layout(tensors, ragged: bool = False) -> dict:
    """The layout attributes of a group of tensors that run as collectives
    of their own: the group's length, which each of them carries, so that
    ranks whose groups differ in length (a tensor missing on one rank) fail
    with MismatchError on every collective they share, rather than combine
    whichever tensors happen to share a position (each tensor's dtype and
    shape are compared already), and the kernel of a shorter group fails
    the longer groups' other collectives (report_missing in
    plugins/tensorflow/tf_op_library.cc); and this rank's group in words,
    for the message. A group of one carries 1 (its collective takes the
    name of the first of a longer group's, so that a rank whose group holds
    one tensor where its peers' hold more fails too), and no words: its
    messages name its tensor already."""
    if len(tensors) < 2:
        return {"layout": len(tensors)}
    shapes = [t.shape[1:] if ragged and t.shape.rank else t.shape for t in tensors]
    listed = ", ".join(str(shape) for shape in shapes[:8]) + (" ..." if len(tensors) > 8 else "")
    what = "shapes after the first dimension" if ragged else "shapes"
    return {
        "layout": len(tensors),
        "layout_text": f"a group of {len(tensors)} tensors of {tensors[0].dtype.name}, {what} {listed}",
    }


def _packed(run_pack, tensors):
    """Many tensors of one dtype reduced as a few flat ones: each pack's
    tensors go to one RingccPackedAllreduce op, whose kernel hands them to
    the engine as one collective in segments and writes the results into
    one flat output, which is split back into their shapes (a split along
    the first dimension makes no copy). Handing each tensor to ringcc's
    kernel as a collective of its own costs several microseconds through
    the C API (its input, its output, its enqueue), which for a gradient
    tape of a thousand variables was most of the step's communication; and
    concatenating them first in TensorFlow copies them all once more than
    shared memory needs, which reads each tensor where it lies.

    A pack hides its tensors' shapes from the engine, which would name
    ranks that disagree on them: run_pack(pack_tensors, p, layout) hands the
    engine a digest of the shapes and dtype with each pack (_layout), which
    the ranks compare as they compare shapes (MismatchError on every rank
    when they differ, with this rank's shapes). The digest covers the
    group's length and number of packs too: ranks whose groups differ fail
    on every pack they share, rather than some packs succeeding, and the
    first pack of a rank that packed its group fails the extra collectives
    of a rank that did not."""
    packs = _packs(tensors)
    out = [None] * len(tensors)
    for p, pack in enumerate(packs):
        members = [tensors[i] for i in pack]
        total = sum(t.shape.num_elements() for t in members)
        flat = run_pack(members, p, _layout(members, p, len(packs), len(tensors)))
        flat.set_shape([total])
        # Every op counts (a few microseconds each in TensorFlow's executor):
        # no reshape where the tensor is flat already, static sizes and shapes.
        sizes = [t.shape.num_elements() for t in members]
        for i, part in zip(pack, tf.split(flat, sizes, 0) if len(pack) > 1 else [flat]):
            out[i] = part if tensors[i].shape.rank == 1 else tf.reshape(part, tensors[i].shape.as_list())
    return out


def _reduction_of(op, prescale_factor, postscale_factor, refused):
    """The reduction attributes of a group's ops, and the error this rank
    refused its arguments with (None: accepted): an op that is no reduction,
    a scale factor that is no number, or `refused`, an error the caller
    found. Refused arguments still build the group's ops, with a valid
    reduction and the error as their `failure`, whose kernels fail their
    collectives on every rank under the names the peers' ops use
    (plugins/tensorflow/tf_op_library.cc, compute)."""
    try:
        reduction = {
            "reduce_op": _op_value(op),
            "prescale_factor": float(prescale_factor),
            "postscale_factor": float(postscale_factor),
        }
    except Exception as error:
        refused = refused or error
    if refused is not None:
        reduction = {"reduce_op": Sum, "prescale_factor": 1.0, "postscale_factor": 1.0}
    reduction["failure"] = error_text(refused) if refused is not None else ""
    return reduction, refused


def convert_group(tensors) -> tuple[list, BaseException | None]:
    """The tensors of a grouped call on the job, converted, and the error of
    the first that does not convert (None: all did). One that does not
    stands in as zeros shaped as the first that does (float32 [1] where none
    does), so that the group's ops are still built, under the names its
    peers' ops use where the group's tensors share one dtype, and fail on
    every rank with that error (_reduction_of's `failure`)."""
    converted, refused = [], None
    for t in tensors:
        try:
            converted.append(tf.convert_to_tensor(t))
        except Exception as error:  # noqa: BLE001 - the call's error, raised by _raising
            refused = refused or error
            converted.append(None)
    if refused is None:
        return converted, None
    model = next((t for t in converted if t is not None), None)
    stand_in = tf.zeros_like(model) if model is not None else tf.zeros([1], tf.float32)
    return [stand_in if t is None else t for t in converted], refused


@contextlib.contextmanager
def _raising(refused):
    """Eagerly, the refusing op's error comes back as the error this rank
    refused its arguments with (as Horovod raises it); in a graph the ops
    fail when they run, with that error's text."""
    try:
        yield
    except tf.errors.OpError:
        if refused is not None:
            raise refused from None
        raise


def grouped_allreduce_op(tensors, op, prescale_factor=1.0, postscale_factor=1.0, name=None, nudge=None, refused=None):
    name = _call_name(name)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    wired = [_to_wire(t, True) for t in tensors]

    # What every op of the group is told besides its tensors and name.
    reduction, refused = _reduction_of(op, prescale_factor, postscale_factor, refused)
    reduction["nudge"] = _nudge() if nudge is None else nudge
    order = _InOrder()

    def run_op(group, group_name):
        return order.run(
            _lib.ringcc_allreduce,
            tensors=group,
            tensor_name=engine_name("allreduce", group_name),
            **_group_layout(group),
            **reduction,
        )

    def run_pack(pack, p, group_name, layout):
        # Packs of one group run as ops of their own, named as the group's
        # collectives are: the first as the group, the others by their
        # index after it (eagerly, unnamed: "packed"; in a graph, unnamed,
        # each its node's name).
        if group_name is None and tf.executing_eagerly():
            group_name = "packed"
        if group_name is not None and p > 0:
            group_name = f"{group_name}.{p}"
        return order.run(
            _lib.ringcc_packed_allreduce,
            tensors=pack,
            layout=layout[0],
            layout_text=layout[1],
            tensor_name=engine_name("allreduce", group_name),
            **reduction,
        )

    def run(group, group_name):
        if not _packable(group):
            return run_op(group, group_name)
        return _packed(lambda pack, p, layout: run_pack(pack, p, group_name, layout), group)

    with _raising(refused):
        out = _by_dtype([w for w, _ in wired], run, name)
    return [_from_wire(o, d) for o, (_, d) in zip(out, wired)]


def _grouped_rows(kind: str, op_fn, wired, name, attrs: dict, ragged: bool) -> list:
    """The results of `kind`'s op (op_fn) over the wired tensors, one op per
    dtype, each with the first dimension its own (known on the other ranks
    only) and its dtype back."""
    order = _InOrder()
    out = _by_dtype(
        [w for w, _ in wired],
        lambda group, group_name: order.run(
            op_fn,
            tensors=group,
            tensor_name=engine_name(kind, group_name),
            nudge=_nudge(),
            **attrs,
            **_group_layout(group, ragged=ragged),
        ),
        name,
    )
    results = []
    for o, (w, d) in zip(out, wired):
        if w.shape.rank:
            o.set_shape([None] + w.shape.as_list()[1:])
        results.append(_from_wire(o, d))
    return results


def grouped_allgather_op(tensors, name=None):
    name = _call_name(name)
    tensors, refused = convert_group(tensors)
    if not tensors:
        return []
    wired = [_to_wire(t if t.shape.rank != 0 else tf.reshape(t, [1]), False) for t in tensors]
    failure = {"failure": error_text(refused) if refused is not None else ""}
    with _raising(refused):
        return _grouped_rows("allgather", _lib.ringcc_allgather, wired, name, failure, ragged=True)


def grouped_reducescatter_op(tensors, op, prescale_factor=1.0, postscale_factor=1.0, name=None, refused=None):
    name = _call_name(name)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    reduction, refused = _reduction_of(op, prescale_factor, postscale_factor, refused)
    wired = [_to_wire(t, True) for t in tensors]
    with _raising(refused):
        return _grouped_rows("reducescatter", _lib.ringcc_reducescatter, wired, name, reduction, ragged=False)


def broadcast_op(tensor, root_rank, name=None, refused=None):
    """The broadcast's op; `refused`: the error this rank refused its
    arguments with, which the op still built fails on every rank with
    (_reduction_of)."""
    tensor = tf.convert_to_tensor(tensor)
    name = _call_name(name)
    wire, dtype = _to_wire(tensor, False)
    with _raising(refused):
        (out,) = _run(
            _lib.ringcc_broadcast,
            tensors=[wire],
            root_rank=int(root_rank),
            tensor_name=engine_name("broadcast", name),
            nudge=_nudge(),
            failure=error_text(refused) if refused is not None else "",
        )
    return _from_wire(out, dtype)


def alltoall_op(tensor, splits, name=None):
    name = _call_name(name)
    # A tensor or splits that do not convert still build the op (a stand-in,
    # equal blocks), which fails on every rank with that error.
    (tensor,), refused = convert_group([tensor])
    scalar = tensor.shape.rank == 0
    if scalar:
        tensor = tf.reshape(tensor, [1])
    if splits is not None:
        try:
            splits = tf.cast(tf.convert_to_tensor(splits), tf.int64)
        except Exception as error:  # noqa: BLE001 - raised by _raising
            refused, splits = refused or error, None
    if splits is None:
        n = ringcc.size()
        rows = tf.shape(tensor, out_type=tf.int64)[0]
        # Equal blocks: the rows must divide evenly (the core checks the sum).
        splits = tf.fill([n], rows // n)
    wire, dtype = _to_wire(tensor, False)
    with _raising(refused):
        out, received = _run(
            _lib.ringcc_alltoall,
            tensor=wire,
            splits=splits,
            tensor_name=engine_name("alltoall", name),
            nudge=_nudge(),
            failure=error_text(refused) if refused is not None else "",
        )
    if wire.shape.rank is not None:
        out.set_shape([None] + wire.shape.as_list()[1:])
    received.set_shape([ringcc.size()])
    return _from_wire(out, dtype), received


# --------------------------------------------------------------------------
# Gradients (as Horovod defines them)


def _grad_name(op) -> str | None:
    base = op.get_attr("tensor_name")
    base = base.decode() if isinstance(base, bytes) else base
    if not base:
        return None
    return base.split(".", 1)[1] + ".grad" if "." in base else base + ".grad"


@tf.RegisterGradient("RingccAllreduce")
def _allreduce_grad(op, *grads):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (Sum, Average):
        raise NotImplementedError("the gradient of allreduce is defined for Sum and Average")
    return grouped_allreduce_op(
        [g if g is not None else tf.zeros_like(x) for g, x in zip(grads, op.inputs)],
        reduce_op,
        op.get_attr("prescale_factor"),
        op.get_attr("postscale_factor"),
        name=_grad_name(op),
    )


@tf.RegisterGradient("RingccPackedAllreduce")
def _packed_allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (Sum, Average):
        raise NotImplementedError("the gradient of allreduce is defined for Sum and Average")
    reduced = grouped_allreduce_op(
        [grad], reduce_op, op.get_attr("prescale_factor"), op.get_attr("postscale_factor"), name=_grad_name(op)
    )[0]
    # Packs are made of tensors whose shapes are known (_packable).
    parts = tf.split(reduced, [x.shape.num_elements() for x in op.inputs], 0)
    return [tf.reshape(part, x.shape.as_list()) for part, x in zip(parts, op.inputs)]


@tf.RegisterGradient("RingccAllgather")
def _allgather_grad(op, *grads):
    out = []
    name = _grad_name(op)
    for i, (g, x) in enumerate(zip(grads, op.inputs)):
        g = grouped_allreduce_op([g], Average, name=None if name is None else f"{name}.{i}")[0]
        rows = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
        all_rows = grouped_allgather_op([rows], name=None if name is None else f"{name}.rows.{i}")[0]
        offset = tf.reduce_sum(all_rows[: ringcc.rank()])
        out.append(
            tf.slice(g, tf.concat([[offset], tf.zeros([tf.rank(g) - 1], tf.int64)], 0), tf.shape(x, out_type=tf.int64))
        )
    return out


@tf.RegisterGradient("RingccBroadcast")
def _broadcast_grad(op, grad):
    reduced = grouped_allreduce_op([grad], Average, name=_grad_name(op))[0]
    if ringcc.rank() != op.get_attr("root_rank"):
        reduced = reduced * 0
    return [reduced]


@tf.RegisterGradient("RingccAlltoall")
def _alltoall_grad(op, grad, _received_grad):
    received = op.outputs[1]
    result, _ = alltoall_op(grad, received, name=_grad_name(op))
    return [result, None]


@tf.RegisterGradient("RingccReducescatter")
def _reducescatter_grad(op, *grads):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (Sum, Average):
        raise NotImplementedError("the gradient of reducescatter is defined for Sum and Average")
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if reduce_op == Sum:
        scale *= ringcc.size()
    scaled = [g * tf.cast(scale, g.dtype) if scale != 1.0 else g for g in grads]
    return grouped_allgather_op(scaled, name=_grad_name(op))


# --------------------------------------------------------------------------
# Generated names for calls that must be matched by call order in eager code

_generated = itertools.count()


def generated_name(kind: str) -> str:
    return f"{kind}.noname.{next(_generated)}"


def reset_generated_names() -> None:
    global _generated
    _generated = itertools.count()


def as_numpy(value) -> np.ndarray:
    return np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else np.asarray(value))
