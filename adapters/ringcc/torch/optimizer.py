"""`hvd.DistributedOptimizer` for `ringcc.torch`: gradients are allreduced as
backward produces them.

Each parameter gets a hook that runs once its gradient has been accumulated
(`Tensor.register_post_accumulate_grad_hook`); the hook starts a named
in-place allreduce of the gradient on ringcc's engine, which fuses ready
gradients and runs them while backward goes on. `step()` (or
`synchronize()`) waits for them all, then runs the wrapped optimizer's step.

Differences from Horovod: the returned optimizer is the one passed in under a
new class (a subclass of its class, as in Horovod) that shares its state,
param_groups and defaults, instead of a fresh instance built from its
param_groups, so state loaded before wrapping is kept and optimizers whose
constructors need extra arguments work. `op=Adasum` raises
NotImplementedError. Gradients accumulated over `backward_passes_per_step`
passes are summed locally, then reduced (as in Horovod: not divided by the
number of passes).
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager

import torch

from ringcc.torch import horovod as _hvd
from ringcc.torch.compression import Compression
from ringcc.torch.functions import broadcast_object
from ringcc.torch.process_sets import global_process_set

__all__ = ["DistributedOptimizer"]


def _split_list(items, parts):
    """`items` in `parts` consecutive groups as even as possible."""
    n = len(items)
    sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
    out, start = [], 0
    for s in sizes:
        if s:
            out.append(items[start : start + s])
        start += s
    return out


class _DistributedOptimizer:
    """Methods mixed into the wrapped optimizer's class."""

    def _hvd_setup(
        self,
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        process_set,
    ):
        self._compression = compression
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [
                (f"allreduce.noname.{i}.{j}", v)
                for i, group in enumerate(self.param_groups)
                for j, v in enumerate(group["params"])
            ]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError(
                "named_parameters should be a sequence of tuples (name, parameter), "
                "usually produced by model.named_parameters()."
            )
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError(f"Parameter names in named_parameters must be unique. Found duplicates: {', '.join(dups)}")
        all_ids = {id(v) for group in self.param_groups for v in group["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        unnamed = all_ids - named_ids
        if unnamed:
            raise ValueError(
                "named_parameters was specified, but one or more model parameters "
                f"were not named. Python object ids: {', '.join(map(str, unnamed))}"
            )
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._hook_handles = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if groups is not None:
            if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
                raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in seen:
                            raise ValueError("A parameter can only appear once in groups.")
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        included = process_set.included()
        set_size = _hvd.size() if process_set is global_process_set else process_set.size()
        if included and (set_size > 1 or os.environ.get("HOROVOD_ELASTIC") == "1"):
            self._register_hooks()

    # -- hooks ---------------------------------------------------------------

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
            # The same order on every rank: rank 0's.
            names = [self._parameter_names.get(p) for p in p_list]
            names = broadcast_object(names, root_rank=self._root_rank(), process_set=self.process_set)
            p_list.sort(key=lambda p: names.index(self._parameter_names.get(p)))
            if isinstance(self._groups, list):
                p_groups, grouped = [], set()
                listed = {id(p) for p in p_list}
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in listed])
                    grouped.update(id(p) for p in p_groups[-1])
                p_groups += [[p] for p in p_list if id(p) not in grouped]
                p_groups = [g for g in p_groups if g]
            else:
                p_groups = _split_list(p_list, self._groups)
            for group in p_groups:
                group = tuple(group)
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    self._hook_handles.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))

    def _root_rank(self):
        return 0 if self.process_set is global_process_set else self.process_set.ranks[0]

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient here (a branch this rank did not take): reduce zeros,
            # since other ranks may have one.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return _hvd.sparse_allreduce_async(tensor, name=name, op=self.op, process_set=self.process_set), None
        compressed, ctx = self._compression.compress(tensor)
        if self.op == _hvd.Average:
            pre = 1.0 / self.gradient_predivide_factor
            post = self.gradient_predivide_factor
        else:
            pre = post = 1.0
        handle = _hvd.allreduce_async_(
            compressed, name=name, op=self.op, prescale_factor=pre, postscale_factor=post, process_set=self.process_set
        )
        return handle, ctx

    def _grouped_allreduce_grad_async(self, ps):
        for p in ps:
            if p.grad is None:
                p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(ps[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in ps])
        if self.op == _hvd.Average:
            pre = 1.0 / self.gradient_predivide_factor
            post = self.gradient_predivide_factor
        else:
            pre = post = 1.0
        handle = _hvd.grouped_allreduce_async_(
            list(compressed),
            name=name,
            op=self.op,
            prescale_factor=pre,
            postscale_factor=post,
            process_set=self.process_set,
        )
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times before "
                        "call to step(). Increase backward_passes_per_step to accumulate "
                        "gradients locally."
                    )
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        handle, ctxs = self._grouped_allreduce_grad_async(group)
                        self._handles[group] = (handle, ctxs)
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)

        return hook

    # -- the public methods -------------------------------------------------

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hooks
        did not run) and writes the results into the gradients."""
        if not self.process_set.included():
            self._synchronized = True
            return
        completed = set()
        for key in self._handles:
            if isinstance(key, tuple):
                completed.update(key)
            else:
                completed.add(key)
        for p in self._requires_update - completed:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, _) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            for p, (handle, ctx) in self._handles.items():
                if isinstance(p, tuple):
                    outputs = _hvd.synchronize(handle)
                    for gp, output, gctx in zip(p, outputs, ctx):
                        self._allreduce_delay[gp] = self.backward_passes_per_step
                        gp.grad.set_(self._compression.decompress(output, gctx))
                    if self._groups is not None and self._group_counts.get(p, 0) != 0:
                        self._group_counts[p] = 0
                else:
                    output = _hvd.synchronize(handle)
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    if self._groups is not None:
                        group = self._p_to_group[p]
                        if self._group_counts[group] != 0:
                            self._group_counts[group] = 0
                    if p.grad.is_sparse:
                        aggregated = self._compression.decompress(output, ctx)
                        if not aggregated.is_sparse:
                            aggregated = aggregated.to_sparse()
                        p.grad.zero_().add_(aggregated)
                    else:
                        result = self._compression.decompress(output, ctx)
                        if result is not p.grad:
                            p.grad.set_(result)
        finally:
            self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize (call synchronize() first):

        optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        with optimizer.skip_synchronize():
            optimizer.step()
        """
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() "
                    "context after optimizer.synchronize(). This can cause training "
                    "slowdown. You may want to consider using "
                    "optimizer.skip_synchronize() context if you use "
                    "optimizer.synchronize() in your code.",
                    stacklevel=2,
                )
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def _step_without_reduction(self):
        """The wrapped optimizer's own step, on the gradients as they are
        (broadcast_optimizer_state's step with zero gradients: a reducing
        step would need every rank)."""
        return super().step()

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before "
                "optimizer.step() or optimizer.synchronize(). This is prohibited "
                "as it can cause a race condition."
            )
        return super().zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(*args, **kwargs)


# Instance attributes that bind the original object (an LR scheduler's
# wrapper of step) and must not follow it into the wrapped one.
_BOUND_ATTRIBUTES = ("step", "zero_grad")


def DistributedOptimizer(
    optimizer,
    named_parameters=None,
    compression=Compression.none,
    backward_passes_per_step=1,
    op=_hvd.Average,
    gradient_predivide_factor=1.0,
    num_groups=0,
    groups=None,
    sparse_as_dense=False,
    process_set=global_process_set,
):
    """Wraps a torch.optim.Optimizer so that gradients are averaged (or
    summed: `op`) over the ranks before each step; each gradient's allreduce
    starts from its backward hook, overlapping the rest of backward.

    Arguments as Horovod's: `named_parameters` (names the allreduces; from
    `model.named_parameters()`), `compression` (hvd.Compression.none/fp16/
    bf16), `backward_passes_per_step` (gradients accumulate locally over that
    many backward passes before one allreduce), `op` (Average by default;
    Sum; Adasum is not implemented), `gradient_predivide_factor` (Average
    only: scale by 1/f before the sum and f/size after), `groups` (an int:
    that many groups of parameters reduced together; or lists of parameters
    to reduce together), `num_groups` (deprecated spelling of groups),
    `sparse_as_dense`, `process_set`.

    Use `optimizer.synchronize()` and `with optimizer.skip_synchronize():`
    to touch gradients (clipping) between backward and step."""
    if op is None:
        op = _hvd.Average
    if op == _hvd.Adasum:
        raise NotImplementedError("ringcc does not implement Adasum; use op=hvd.Average or hvd.Sum")
    if gradient_predivide_factor != 1.0 and op != _hvd.Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn(
            "Parameter `num_groups` has been replaced by `groups` and will be removed.",
            DeprecationWarning,
            stacklevel=2,
        )
        if groups is None:
            groups = num_groups
    if isinstance(optimizer, _DistributedOptimizer):
        raise ValueError("this optimizer is a DistributedOptimizer already")
    base = optimizer.__class__
    cls = type(base.__name__, (_DistributedOptimizer, base), {"__module__": base.__module__})
    wrapped = cls.__new__(cls)
    state = {k: v for k, v in optimizer.__dict__.items() if k not in _BOUND_ATTRIBUTES}
    wrapped.__dict__.update(state)
    patch = getattr(wrapped, "_patch_step_function", None)
    if patch is not None:  # optimizer step hooks and the profiler's step ranges
        patch()
    wrapped._hvd_setup(
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        process_set,
    )
    return wrapped
