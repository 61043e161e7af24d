"""Horovod-style training helpers: DistributedOptimizer, DistributedTrainer,
broadcast_parameters (the same names and arguments as horovod.mxnet)."""

from __future__ import annotations

import itertools
import types
import warnings

import mxnet as mx

import ringcc
from ringcc.mxnet import ops
from ringcc.mxnet.compression import Compression
from ringcc.process_sets import ProcessSet, global_process_set

__all__ = ["DistributedOptimizer", "DistributedTrainer", "broadcast_parameters"]

# Creation counters: the collective names of two optimizers or trainers (a GAN
# has two) differ, so that their collectives may be in flight together. They
# name the same objects on every rank when every rank creates them in the
# same order, as the same program does.
_optimizers = itertools.count()
_trainers = itertools.count()


def _split(items, groups):
    """`items` in `groups` consecutive parts of nearly equal length."""
    groups = max(1, min(groups, len(items)))
    size, extra = divmod(len(items), groups)
    out, start = [], 0
    for g in range(groups):
        end = start + size + (1 if g < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _set_size(process_set) -> int:
    """The number of ranks of a registered process set (raises otherwise)."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a ProcessSet, got {type(process_set).__name__}")
    size = process_set.size()
    if size is None:
        raise ValueError(f"{process_set} is not registered: add it with add_process_set() first")
    return size


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an MXNet optimizer: update() first averages the gradients over
    the ranks of `process_set` (allreduce, in place), then runs the wrapped
    optimizer's update.

    For the Module API (mod.init_optimizer(optimizer=...)) or a
    gluon.Trainer(..., kvstore=None). Every attribute other than update
    belongs to the wrapped optimizer (reads and writes go to it), so
    learning rates, schedulers and states behave as without the wrapper.
    The average is a sum with the optimizer's rescale_grad divided by the
    number of ranks of the set (gradient_predivide_factor moves part of that
    division before the sum, as in Horovod). A rank outside the set updates
    with its own gradients, unscaled."""

    _OWN = frozenset(
        (
            "_optimizer",
            "_gradient_predivide_factor",
            "_num_groups",
            "_name_prefix",
            "_process_set",
            "update",
            "update_multi_precision",
            "_do_allreduce",
        )
    )

    def __init__(self, optimizer, gradient_predivide_factor=1.0, num_groups=0, process_set=global_process_set):
        if not isinstance(optimizer, mx.optimizer.Optimizer):
            raise TypeError(f"DistributedOptimizer wraps an mxnet Optimizer, got {type(optimizer).__name__}")
        size = _set_size(process_set)
        object.__setattr__(self, "_optimizer", optimizer)
        object.__setattr__(self, "_gradient_predivide_factor", float(gradient_predivide_factor))
        object.__setattr__(self, "_num_groups", int(num_groups))
        object.__setattr__(self, "_name_prefix", f"mx.opt{next(_optimizers)}.")
        object.__setattr__(self, "_process_set", process_set)
        if process_set.included():
            optimizer.rescale_grad *= gradient_predivide_factor / size

    def __getattribute__(self, name):
        if name in DistributedOptimizer._OWN or (name.startswith("__") and name.endswith("__")):
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_optimizer"), name)

    def __setattr__(self, name, value):
        if name in DistributedOptimizer._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._optimizer, name, value)

    def __getstate__(self):  # pickled by Trainer.save_states (the wrapped optimizer drops its param_dict)
        # A process set is this process's registration: a loaded optimizer
        # reduces over the global set.
        return {
            name: object.__getattribute__(self, name)
            for name in ("_optimizer", "_gradient_predivide_factor", "_num_groups")
        }

    def __setstate__(self, state):  # rescale_grad was divided by the ranks before it was saved
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_name_prefix", f"mx.opt{next(_optimizers)}.")
        object.__setattr__(self, "_process_set", global_process_set)

    def _do_allreduce(self, index, grad):
        process_set = self._process_set
        if not process_set.included():
            return
        prescale = 1.0 / self._gradient_predivide_factor
        prefix = self._name_prefix
        if isinstance(index, (tuple, list)):
            entries = [(f"{prefix}{i}", [g], None) for i, g in zip(index, grad)]
            groups = _split(entries, self._num_groups) if self._num_groups > 0 else [entries]
            for g, group in enumerate(groups):
                ops.reduce_lists(
                    f"{group[0][0]}+{len(group) - 1}",
                    group,
                    op=ringcc.Sum,
                    prescale_factor=prescale,
                    priority=-g,
                    process_set=process_set,
                )
        else:
            ops.reduce_lists(
                f"{prefix}{index}",
                [(f"{prefix}{index}", [grad], None)],
                op=ringcc.Sum,
                prescale_factor=prescale,
                process_set=process_set,
            )

    def update(self, index, weight, grad, state):
        self._do_allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        self._do_allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer that averages the gradients over the ranks of
    `process_set` with ringcc before each update (no kvstore), as
    horovod.mxnet.DistributedTrainer.

    step(batch_size) takes the *local* batch size. Each parameter's gradient
    is reduced as soon as backward has produced it (one named collective
    each, fused by ringcc); num_groups > 0 reduces them in that many groups
    instead. `compression` (Compression.fp16) sends the gradients compressed
    and writes them back decompressed before the update. Start from
    identical parameters: call
    ringcc.mxnet.broadcast_parameters(net.collect_params()) first. A rank
    outside `process_set` updates with its own gradients, unscaled."""

    def __init__(
        self,
        params,
        optimizer,
        optimizer_params=None,
        compression=Compression.none,
        gradient_predivide_factor=1.0,
        prefix=None,
        num_groups=0,
        process_set=global_process_set,
    ):
        # Horovod's argument order.
        if compression is None:
            compression = Compression.none
        if not callable(getattr(compression, "compress", None)) or not callable(
            getattr(compression, "decompress", None)
        ):
            raise TypeError(
                "compression must be a compressor (ringcc.mxnet.Compression.none or .fp16, or a class "
                f"with compress() and decompress()), got {compression!r}"
            )
        size = _set_size(process_set)
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer
            warnings.warn(
                "DistributedTrainer does not take a DistributedOptimizer: its wrapped optimizer is used instead",
                stacklevel=2,
            )
        if isinstance(params, (dict, mx.gluon.ParameterDict)):
            params = [params[key] for key in sorted(params.keys())]
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        self._process_set = process_set
        self._compression = compression
        if process_set.included():
            # Dividing the scale by the number of ranks turns the sum into an average.
            self._scale *= gradient_predivide_factor / size
        self._gradient_predivide_factor = float(gradient_predivide_factor)
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError("prefix must be a string")
        # Names: mx.trainer<N>.<prefix><parameter index> (N: this process's Nth DistributedTrainer).
        self._prefix = f"mx.trainer{next(_trainers)}.{prefix or ''}"
        self._num_groups = int(num_groups)

    def _allreduce_grads(self):
        process_set = self._process_set
        if not process_set.included():
            return
        compress = self._compression is not Compression.none
        entries, restore = [], []
        for i, param in enumerate(self._params):
            if param.grad_req == "null":
                continue
            grads = param.list_grad()
            if compress:
                pairs = [self._compression.compress(g) for g in grads]
                restore.extend((g, c, ctx) for g, (c, ctx) in zip(grads, pairs))
                grads = [c for c, _ in pairs]
            entries.append((f"{self._prefix}{i}", grads, None))
        if not entries:
            return
        prescale = 1.0 / self._gradient_predivide_factor
        if self._num_groups > 0:
            groups = [(group[0][0] + f"+{len(group) - 1}", group) for group in _split(entries, self._num_groups)]
        else:
            groups = [(entry[0], [entry]) for entry in entries]
        for g, (label, group) in enumerate(groups):
            ops.reduce_lists(
                label, group, op=ringcc.Sum, prescale_factor=prescale, priority=-g, process_set=process_set
            )
        for grad, compressed, ctx in restore:
            restored = self._compression.decompress(compressed, ctx)
            if restored is not grad:
                restored.copyto(grad)


def _broadcast_arrays(arrays, root_rank, name):
    """Broadcasts the first array in place and copies it to the others (one parameter's devices)."""
    ops.broadcast_(arrays[0], root_rank, name=name)
    for other in arrays[1:]:
        arrays[0].copyto(other)


def _broadcast_after_init(param, root_rank, name):
    init_impl = param._init_impl

    def wrapped_init_impl(self, *args, **kwargs):
        init_impl(*args, **kwargs)
        _broadcast_arrays(self.list_data(), root_rank, name)

    return wrapped_init_impl


def broadcast_parameters(params, root_rank=0, prefix=None):
    """Overwrites every parameter with root_rank's (in place, on every rank).

    params: a dict of name -> NDArray or Parameter, or a gluon ParameterDict
    (net.collect_params()). A Parameter whose initialisation is deferred
    (shape unknown until the first forward) is broadcast right after it is
    initialised. Every rank must pass the same names."""
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError("prefix must be a string")
    prefix = prefix or ""
    if not isinstance(params, (dict, mx.gluon.ParameterDict)):
        raise ValueError(f"invalid params of type: {type(params)}")
    for name, p in sorted(params.items()):
        full = f"mx.param.{prefix}{name}"
        if isinstance(p, mx.gluon.Parameter):
            try:
                arrays = p.list_data()
            except mx.gluon.parameter.DeferredInitializationError:
                p._init_impl = types.MethodType(_broadcast_after_init(p, root_rank, full), p)
                continue
            _broadcast_arrays(arrays, root_rank, full)
        else:
            _broadcast_arrays([p], root_rank, full)
