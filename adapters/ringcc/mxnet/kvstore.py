"""The MXNet kvstore "ring": mx.kv.create("ring") after `import ringcc.mxnet`.

It implements what gluon.Trainer (and the Module API) call on a kvstore that
updates parameters locally: broadcast (initial parameters from rank 0),
pushpull (sum of the gradients over the local devices and all ranks), rank,
num_workers, is_capable. Like Horovod's kvstore it cannot run the optimizer
on the store (is_capable("optimizer") is False): each rank updates its own
copy of the parameters with the summed gradients, so Trainer.step needs the
global batch size (local batch size x num_workers) to average them.
"""

from __future__ import annotations

import os

import mxnet as mx
from mxnet.kvstore import KVStoreBase

import ringcc
from ringcc.mxnet import _engine, ops
from ringcc.mxnet.errors import mxnet_errors

__all__ = ["RingKVStore", "Ring"]

KVSTORE_NAME = "ring"
_KEY_VARS = {}


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _entries(key, value, out):
    """[(key, [values], [outs] or None)] for one key or a list of keys."""
    if isinstance(key, (list, tuple)):
        keys = list(key)
        if not isinstance(value, (list, tuple)) or len(value) != len(keys):
            raise ringcc.InvalidArgumentError(f"{len(keys)} keys need a list of {len(keys)} values, one per key")
        if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(keys)):
            raise ringcc.InvalidArgumentError(f"{len(keys)} keys need a list of {len(keys)} outs, one per key")
        outs = [None] * len(keys) if out is None else [_as_list(o) for o in out]
        return [(k, _as_list(v), o) for k, v, o in zip(keys, value, outs)]
    return [(key, _as_list(value), None if out is None else _as_list(out))]


def _check_key(key):
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise ringcc.InvalidArgumentError(f"kvstore keys are ints or strings, got {key!r}")
    return key


class RingKVStore(KVStoreBase):
    """A kvstore whose pushpull is a ringcc allreduce (sum) over all ranks."""

    def __init__(self):
        ringcc.init()  # joins the job (ringrun, mpirun, SLURM...); no-op when already joined

    @staticmethod
    def _key_var(key):
        """The engine variable of a key, written by every operation on it: they
        run in call order, so a key's collective name is never in flight twice.
        Shared by all the kvstores of the process (two Trainers use the same
        keys, 0, 1, ...), by str(key) (the names hold str(key))."""
        var = _KEY_VARS.get(str(key))
        if var is None:
            var = _KEY_VARS.setdefault(str(key), mx.nd.zeros((1,), ctx=mx.cpu()))
        return var

    # -- what Trainer calls ---------------------------------------------------

    @mxnet_errors
    def broadcast(self, key, value, out, priority=0):
        """Writes rank 0's `value` into every array of `out` (on every rank)."""
        _check_key(key)
        name = f"mx.kv.broadcast.{key}"
        try:
            _engine.check_array(value, "value")
            outs = _as_list(out)
            for o in outs:
                _engine.check_array(o, "out")
                if tuple(o.shape) != tuple(value.shape):
                    raise ringcc.InvalidArgumentError(f"key {key!r}: out has shape {o.shape}, the value {value.shape}")
        except Exception as error:
            ops.fail("broadcast", error, [name])  # the peers' broadcast of the key fails too
            raise
        var = self._key_var(key)
        in_place = any(o is value for o in outs)
        first = value if in_place else outs[0]
        if in_place:

            def start(views, handles):
                handles.append(ringcc.broadcast_async_(views[0], 0, name=name))

            ops.run(name, [], [value, var], start, priority)
        else:

            def start(views, handles):
                handles.append(ringcc.broadcast_async(views[0], 0, name=name, out=views[1]))

            ops.run(name, [value], [first, var], start, priority)
        for o in outs:
            if o is not first:
                first.copyto(o)

    @mxnet_errors
    def pushpull(self, key, value, out=None, priority=0):
        """Sums `value` over the local devices and all ranks into `out` (into
        `value` when out is None). `key` may be a list of keys, with a list of
        values (and outs): they run as one operation, fused by ringcc."""
        keys = list(key) if isinstance(key, (list, tuple)) else [key]
        for k in keys:
            _check_key(k)
        try:
            entries = _entries(key, value, out)
            if len({str(k) for k, _, _ in entries}) != len(entries):
                raise ringcc.InvalidArgumentError("pushpull got the same key twice in one call")
        except Exception as error:
            # The peers' pushpull of these keys fails too.
            ops.fail("allreduce", error, sorted({f"mx.kv.pushpull.{k}" for k in keys}))
            raise
        vars_ = [self._key_var(k) for k, _, _ in entries]
        label = f"mx.kv.pushpull.{entries[0][0]}" + (f"+{len(entries) - 1}" if len(entries) > 1 else "")
        ops.reduce_lists(
            label,
            [(f"mx.kv.pushpull.{k}", v, o) for k, v, o in entries],
            op=ringcc.Sum,
            priority=priority,
            extra_writes=vars_,
        )

    def init(self, key, value):
        """Makes `value` (an NDArray or a list of them) rank 0's on every rank,
        in place: what the Module API calls when the store does not update."""
        values = _as_list(value)
        self.broadcast(key, values[0], values, priority=0)

    def set_optimizer(self, optimizer):
        raise NotImplementedError(
            "the ring kvstore does not run the optimizer on the store (is_capable('optimizer') "
            "is False): gluon.Trainer and the Module API update the parameters on every rank after "
            "pushpull when update_on_kvstore is False or left to its default; do not pass "
            "update_on_kvstore=True"
        )

    @staticmethod
    def is_capable(capability):
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return False
        raise ValueError(f"Unknown capability: {capability}")

    def save_optimizer_states(self, fname, dump_optimizer=False):
        raise NotImplementedError(
            "the ring kvstore holds no optimizer state: save it with Trainer.save_states(), "
            "which saves the local updater's state when update_on_kvstore is False"
        )

    def load_optimizer_states(self, fname):
        raise NotImplementedError("the ring kvstore holds no optimizer state: load it with Trainer.load_states()")

    def set_gradient_compression(self, compression_params):
        raise NotImplementedError("the ring kvstore does not compress gradients")

    @property
    def type(self):
        return KVSTORE_NAME

    @property
    def rank(self):
        return ringcc.rank()

    @property
    def num_workers(self):
        return ringcc.size()

    @property
    def local_rank(self):
        return ringcc.local_rank()

    @property
    def local_size(self):
        return ringcc.local_size()


@KVStoreBase.register
class Ring(RingKVStore):
    """RingKVStore under the name "ring": MXNet's registry keys a kvstore
    by its class name in lower case (mx.kv.create("ring"))."""


# ---------------------------------------------------------------------------
# gluon.Trainer(..., kvstore="ring") with a single context
#
# Trainer creates its kvstore through mxnet.model._create_kvstore, which for a
# string drops the kvstore altogether when there is one device and the name
# does not contain "dist" (one process would have nothing to reduce). For
# "ring" that would silently train every rank on its own. The wrapper below
# creates ours for the name "ring" whatever the number of devices; every other
# name goes to MXNet's function unchanged.


def _wrap_create_kvstore():
    import mxnet.model as model

    original = model._create_kvstore
    if getattr(original, "_ringcc_wrapper", False):
        return

    def _create_kvstore(kvstore, num_device, arg_params):
        if isinstance(kvstore, str) and kvstore.lower() == KVSTORE_NAME:
            kv = mx.kv.create(kvstore)
            update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
            return kv, update_on_kvstore and kv.is_capable(KVStoreBase.OPTIMIZER)
        return original(kvstore, num_device, arg_params)

    _create_kvstore._ringcc_wrapper = True
    _create_kvstore.__wrapped__ = original
    _create_kvstore.__doc__ = original.__doc__
    import importlib

    for module_name in ("mxnet.model", "mxnet.gluon.trainer", "mxnet.module.module"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - every MXNet 1.x has them
            continue
        if getattr(module, "_create_kvstore", None) is original:
            module._create_kvstore = _create_kvstore


_wrap_create_kvstore()
