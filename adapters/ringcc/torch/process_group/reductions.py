"""The reducing collectives of backend "ring"'s process group: allreduce
(dense, sparse, coalesced; reductions the core lacks are gathered and
reduced locally), reduce, and reduce_scatter in its forms. A mixin of
ProcessGroupRing (backend.py) over base.GroupBase's machinery."""

from __future__ import annotations

import torch

from ringcc import _core
from ringcc.torch.dtypes import CORE_DTYPES
from ringcc.torch.process_group.base import AsyncOf, WorkWaitable, fails_on_every_rank, note_issued, raise_as_dist_error
from ringcc.torch.process_group.reduce_ops import (
    CORE_OPS,
    FAST_OPS,
    RedOpType,
    core_reduces,
    reduce_locally,
    reduction,
)
from ringcc.torch.process_group.tensors import CPU, input_units, one_tensor, output_units, plain, store_units
from ringcc.torch.work import RingWork


class ReductionCollectives:
    """allreduce, reduce and reduce_scatter of ProcessGroupRing."""

    # -- allreduce -----------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        # The common case, kept short: one dense contiguous CPU tensor that
        # the core reduces, asked for synchronously or not; a CUDA one asked
        # for synchronously (on the current stream).
        if len(tensors) == 1 and opts is not None:
            t = tensors[0]
            op = FAST_OPS.get(opts.reduceOp.op.value)
            if (
                t.is_cuda
                and op is not None
                and t.dtype in CORE_DTYPES
                and t.layout == torch.strided
                and getattr(opts, "asyncOp", True) is False
                and t.device.index == self._cuda_index
                and not t.requires_grad
                and t.is_contiguous()
                and not self._closed
                and self._coalescing is None
                and not torch.autograd._profiler_enabled()
                and self._inline_ok(opts)
            ):
                try:
                    self._comm.allreduce(t, None, op, 1.0, 1.0, True, False)
                except _core.RingccError as error:
                    raise_as_dist_error(error)
                return RingWork((t,), stream=torch.cuda.current_stream(t.device))
            if (
                op is not None
                and t.dtype in CORE_DTYPES
                and t.is_cpu
                and t.layout == torch.strided
                and not t.requires_grad
                and t.is_contiguous()
                and not self._closed
                and self._coalescing is None
                and not torch.autograd._profiler_enabled()
            ):
                try:
                    if getattr(opts, "asyncOp", True) is False and self._inline_ok(opts):
                        self._comm.allreduce(t, None, op, 1.0, 1.0, True, False)
                        return RingWork((t,))
                    handle = self._comm.allreduce(t, None, op, 1.0, 1.0, True, True)
                except _core.RingccError as error:
                    raise_as_dist_error(error)
                work = RingWork(
                    (t,),
                    (handle,),
                    None,
                    timeout_s=self._op_timeout(opts),
                    completer=self._completer,
                    what=self._what("all_reduce"),
                    on_timeout=self._timed_out,
                )
                if getattr(opts, "asyncOp", True) is False:
                    work.wait()
                return work
        return self._allreduce_checked(tensors, opts)

    @fails_on_every_rank("allreduce")
    def _allreduce_checked(self, tensors, opts):
        device = self._device(tensors, "allreduce", sparse_ok=True)
        kind, factor = reduction(opts)
        if len(tensors) == 1 and tensors[0].is_sparse:
            return self._sparse_allreduce(tensors[0], kind, opts)
        if len(tensors) == 1:
            return self._allreduce_one("all_reduce", tensors[0], kind, factor, opts, device)
        return self._allreduce_many("all_reduce", list(tensors), kind, factor, opts, device)

    @fails_on_every_rank("allreduce")
    def allreduce_coalesced(self, tensors, opts=None):
        device = self._device(tensors, "allreduce_coalesced")
        kind, factor = reduction(opts)
        return self._allreduce_many("allreduce_coalesced", list(tensors), kind, factor, opts, device)

    def _allreduce_one(self, name, tensor, kind, factor, opts, device=CPU):
        if not core_reduces(kind, tensor.dtype):
            return self._fallback_allreduce(name, [tensor], kind, factor, opts, device)
        op = CORE_OPS[kind]
        comm = self._comm
        t = plain(tensor)
        if t.is_contiguous():

            def start(async_op):
                h = comm.allreduce(t, op=op, prescale=factor, inplace=True, async_op=async_op)
                return [h] if async_op else None

            return self._issue(name, opts, [tensor], start, device=device)
        staged = t.contiguous()

        def start(async_op):
            h = comm.allreduce(staged, op=op, prescale=factor, inplace=True, async_op=async_op)
            return [h] if async_op else None

        return self._issue(name, opts, [tensor], start, lambda: tensor.copy_(staged), device=device)

    def _allreduce_many(self, name, tensors, kind, factor, opts, device=CPU):
        """Fused: the core packs the list into its fusion buffer (CUDA
        tensors: fused on the device)."""
        if not tensors:
            return self._issue(name, opts, [], lambda a: [] if a else None)
        if not all(core_reduces(kind, t.dtype) for t in tensors):
            return self._fallback_allreduce(name, tensors, kind, factor, opts, device)
        op = CORE_OPS[kind]
        comm = self._comm
        staged = []
        copies = []
        for t in tensors:
            p = plain(t)
            if p.is_contiguous():
                staged.append(p)
            else:
                s = p.contiguous()
                staged.append(s)
                copies.append((t, s))

        def start(async_op):
            h = comm.grouped_allreduce(staged, op=op, prescale=factor, inplace=True, async_op=async_op)
            return [h] if async_op else None

        def finish():
            for t, s in copies:
                t.copy_(s)

        return self._issue(name, opts, tensors, start, finish if copies else None, device=device)

    def _sparse_allreduce(self, tensor, kind, opts):
        """Sparse COO SUM (as gloo does it): every rank's indices and values
        are gathered (their counts may differ), summed, and coalesced into
        `tensor` in place."""

        def check():
            if kind != RedOpType.SUM:
                raise ValueError(f"sparse all_reduce supports SUM only, got {kind}")
            if tensor.dtype not in CORE_DTYPES:
                raise TypeError(f"sparse all_reduce: unsupported dtype {tensor.dtype}")

        check()
        if tensor.is_cuda:
            return self._sparse_allreduce_through_host(tensor, kind, opts)
        local = plain(tensor).coalesce()
        indices = local._indices().t().contiguous()  # one row per non-zero
        values = local._values().contiguous()
        comm = self._comm
        # How many non-zeros each rank has (a small blocking exchange), so
        # that the gathers below write straight into tensors of the right size.
        counts = torch.empty(self._size, dtype=torch.int64)
        note_issued()
        try:
            comm.allgather(torch.tensor([indices.shape[0]], dtype=torch.int64), out=counts)
        except _core.RingccError as error:
            raise_as_dist_error(error)
        total = int(counts.sum())
        all_indices = torch.empty(total, local.sparse_dim(), dtype=torch.int64)
        all_values = torch.empty((total,) + tuple(values.shape[1:]), dtype=values.dtype)

        def start(async_op):
            handles = [
                comm.allgather(indices, out=all_indices, async_op=async_op),
                comm.allgather(values, out=all_values, async_op=async_op),
            ]
            return handles if async_op else None

        def finish():
            summed = torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.shape).coalesce()
            tensor.copy_(summed)

        return self._issue("all_reduce", opts, [tensor], start, finish)

    def _sparse_allreduce_through_host(self, tensor, kind, opts):
        """A sparse CUDA tensor: summed as a CPU copy, copied back (sparse
        tensors are rare enough in collectives not to have a device path)."""
        host = plain(tensor).cpu()
        inner = self._sparse_allreduce(host, kind, opts)

        def finish():
            tensor.copy_(host.to(tensor.device))

        work = RingWork(
            [tensor], [WorkWaitable(inner)], finish, timeout_s=self._op_timeout(opts), completer=self._completer
        )
        if getattr(opts, "asyncOp", True) is False:
            work.wait()
        return work

    def _fallback_allreduce(self, name, tensors, kind, factor, opts, device=CPU):
        """Reductions the core lacks (bitwise ops, bool, int16, complex, ...):
        gather every rank's bytes, reduce locally."""

        def check():  # e.g. a bitwise reduction of floats
            for t in tensors:
                reduce_locally(torch.zeros(1, 1, dtype=t.dtype), kind, factor)

        check()
        n = self._size
        packed = (
            torch.cat([input_units(t).view(torch.uint8) for t in tensors])
            if tensors
            else torch.empty(0, dtype=torch.uint8, device=device)
        )
        gathered = torch.empty(n * packed.numel(), dtype=torch.uint8, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(packed, out=gathered, async_op=async_op)
            return [h] if async_op else None

        def finish():
            per_rank = gathered.view(n, -1)
            offset = 0
            for t in tensors:
                nbytes = t.numel() * t.element_size()
                stacked = per_rank[:, offset : offset + nbytes].contiguous().view(t.dtype).view((n,) + tuple(t.shape))
                t.copy_(reduce_locally(stacked, kind, factor))
                offset += nbytes

        return self._issue(name, opts, tensors, start, finish, device=device)

    # -- reduce ----------------------------------------------------------------

    @fails_on_every_rank("allreduce")
    def reduce(self, tensors, opts=None):
        """Reduction to the root only: an allreduce whose non-root ranks
        write into scratch, so their tensors stay as they were."""
        device = self._device(tensors, "reduce")
        tensor = one_tensor(tensors, "reduce")
        root = getattr(opts, "rootRank", 0)
        self._check_rank(root, "root")
        kind, factor = reduction(opts)
        if self._rank == root:
            return self._allreduce_one("reduce", tensor, kind, factor, opts, device)
        scratch = plain(tensor).clone(memory_format=torch.contiguous_format)
        work = self._allreduce_one("reduce", scratch, kind, factor, opts, device)
        work._outputs = [tensor]
        return work

    # -- reduce_scatter -------------------------------------------------------

    @fails_on_every_rank("reduce_scatter")
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = one_tensor(output_tensors, "reduce_scatter")
        pieces = list(one_tensor(input_tensors, "reduce_scatter"))
        device = self._device([out, *pieces], "reduce_scatter")
        self._check_list(pieces, "reduce_scatter input list", out)
        kind, factor = reduction(opts)
        sizes = [p.numel() for p in pieces]
        if len(set(sizes)) == 1 and core_reduces(kind, out.dtype):
            stacked = torch.cat([input_units(p) for p in pieces]).view(self._size, -1)
            return self._reduce_scatter_rows("reduce_scatter", stacked, out, kind, factor, opts, device)
        # Uneven pieces (reduce_scatter_v) or a reduction the core lacks:
        # reduce everything, keep our piece.
        whole = torch.cat([input_units(p).view(torch.uint8) for p in pieces]).view(out.dtype)
        return self._reduce_then_keep("reduce_scatter", whole, sizes, out, kind, factor, opts, device)

    @fails_on_every_rank("reduce_scatter")
    def reduce_scatter_single(self, output_tensor, input_tensor, opts=None):
        """reduce_scatter_tensor: the input holds size x output elements."""
        device = self._device([output_tensor, input_tensor], "reduce_scatter_tensor")

        def check():
            self._check_dtypes(output_tensor, input_tensor)
            if input_tensor.numel() != self._size * output_tensor.numel():
                raise ValueError(
                    f"reduce_scatter_tensor: input has {input_tensor.numel()} elements, "
                    f"expected {self._size} x {output_tensor.numel()}"
                )

        check()
        kind, factor = reduction(opts)
        if not core_reduces(kind, output_tensor.dtype):
            whole = input_units(input_tensor).view(torch.uint8).view(output_tensor.dtype)
            sizes = [output_tensor.numel()] * self._size
            return self._reduce_then_keep(
                "_reduce_scatter_base", whole, sizes, output_tensor, kind, factor, opts, device
            )
        stacked = input_units(input_tensor).view(self._size, -1)
        return self._reduce_scatter_rows("_reduce_scatter_base", stacked, output_tensor, kind, factor, opts, device)

    def _reduce_scatter_rows(self, name, stacked, out, kind, factor, opts, device=CPU):
        op = CORE_OPS[kind]
        comm = self._comm
        direct = output_units(out)
        target = (
            direct.view(1, -1)
            if direct is not None
            else torch.empty(1, stacked.shape[1], dtype=stacked.dtype, device=device)
        )

        def start(async_op):
            h = comm.reduce_scatter(stacked, out=target, op=op, prescale=factor, async_op=async_op)
            return [h] if async_op else None

        finish = None if direct is not None else (lambda: store_units(target.view(-1), out))
        return self._issue(name, opts, [out], start, finish, device=device)

    def _reduce_then_keep(self, name, whole, sizes, out, kind, factor, opts, device=CPU):
        scratch = whole.clone()
        work = self._allreduce_one(name, scratch, kind, factor, AsyncOf(opts), device)
        begin = sum(sizes[: self._rank])
        piece = sizes[self._rank]

        def finish():
            out.copy_(scratch[begin : begin + piece].view(out.shape))

        combined = RingWork(
            [out],
            [WorkWaitable(work)],
            finish,
            timeout_s=self._op_timeout(opts),
            completer=self._completer,
            stream=work._stream,
        )
        if getattr(opts, "asyncOp", True) is False:
            combined.wait()
        return combined

    def reduce_scatter_single_coalesced(self, output_tensors, input_tensors, opts=None):
        calls = [(self._reduce_scatter_single_with, (o, i, opts)) for o, i in zip(output_tensors, input_tensors)]
        return self._each("reduce_scatter_tensor_coalesced", opts, calls)

    def _reduce_scatter_single_with(self, out, inp, opts, _none=None):
        return self.reduce_scatter_single(out, inp, AsyncOf(opts))

    # -- names torch used before 2.6 (and still accepts) ---------------------

    def _reduce_scatter_base(self, output_tensor, input_tensor, opts=None):
        return self.reduce_scatter_single(output_tensor, input_tensor, opts)

    def reduce_scatter_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        return self.reduce_scatter_single_coalesced(output_tensors, input_tensors, opts)
