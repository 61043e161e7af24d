"""The collectives of backend "ring"'s process group that move data without
reducing it: broadcast, allgather (all_gather_v, into one tensor,
coalesced), gather and scatter, alltoall and all_to_all_single, barrier. A
mixin of ProcessGroupRing (backend.py) over base.GroupBase's machinery."""

from __future__ import annotations

import torch

from ringcc import _core
from ringcc.torch.process_group.base import fails_on_every_rank
from ringcc.torch.process_group.tensors import (
    as_units,
    input_units,
    one_tensor,
    output_units,
    plain,
    rows_view,
    store_pieces,
    store_units,
    unit_count,
    unit_dtype,
)


class DataMovementCollectives:
    """broadcast, allgather, gather, scatter, alltoall and barrier of ProcessGroupRing."""

    # -- broadcast -------------------------------------------------------------

    @fails_on_every_rank("broadcast")
    def broadcast(self, tensors, opts=None):
        device = self._device(tensors, "broadcast")
        root = getattr(opts, "rootRank", 0)
        tensor = one_tensor(tensors, "broadcast")
        self._check_rank(root, "root")
        comm = self._comm
        t = plain(tensor)
        units = output_units(t)
        if units is not None:

            def start(async_op):
                h = comm.broadcast(units, root=root, inplace=True, async_op=async_op)
                return [h] if async_op else None

            return self._issue("broadcast", opts, [tensor], start, device=device)
        staged = input_units(t)

        def start(async_op):
            h = comm.broadcast(staged, root=root, inplace=True, async_op=async_op)
            return [h] if async_op else None

        return self._issue("broadcast", opts, [tensor], start, lambda: store_units(staged, tensor), device=device)

    # -- allgather -------------------------------------------------------------

    @fails_on_every_rank("allgather")
    def allgather(self, output_tensors, input_tensors, opts=None):
        """Every rank's input into output_tensors[0][r]; sizes may differ by
        rank (all_gather_v) as long as each output matches its rank's input."""
        inp = one_tensor(input_tensors, "allgather")
        outs = list(one_tensor(output_tensors, "allgather"))
        device = self._device([inp, *outs], "allgather")
        self._check_list(outs, "allgather output list", inp)
        units = input_units(inp)
        unit = units.dtype
        total = sum(unit_count(o) for o in outs)
        gathered = torch.empty(total, dtype=unit, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(units, out=gathered, async_op=async_op)
            return [h] if async_op else None

        return self._issue("all_gather", opts, outs, start, lambda: store_pieces(gathered, outs), device=device)

    @fails_on_every_rank("allgather")
    def all_gather_single(self, output_tensor, input_tensor, opts=None):
        """all_gather_into_tensor: inputs concatenated in rank order."""
        device = self._device([output_tensor, input_tensor], "all_gather_into_tensor")
        self._check_dtypes(output_tensor, input_tensor)
        units = input_units(input_tensor)
        comm = self._comm
        out = output_units(output_tensor)
        if out is not None:

            def start(async_op):
                h = comm.allgather(units, out=out, async_op=async_op)
                return [h] if async_op else None

            return self._issue("_allgather_base", opts, [output_tensor], start, device=device)
        staged = torch.empty(unit_count(output_tensor), dtype=units.dtype, device=device)

        def start(async_op):
            h = comm.allgather(units, out=staged, async_op=async_op)
            return [h] if async_op else None

        return self._issue(
            "_allgather_base", opts, [output_tensor], start, lambda: store_units(staged, output_tensor), device=device
        )

    @fails_on_every_rank("allgather")
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """Several allgathers in one: output_lists[r][i] gets rank r's
        input_list[i]; the inputs' bytes are packed and gathered together."""
        inputs = list(input_list)
        outputs = [list(o) for o in output_lists]
        device = self._device(inputs + [t for o in outputs for t in o], "allgather_coalesced")

        def check():
            if len(outputs) != self._size:
                raise ValueError(f"allgather_coalesced: {len(outputs)} output lists for a group of {self._size} ranks")
            for o in outputs:
                if len(o) != len(inputs):
                    raise ValueError(
                        f"allgather_coalesced: an output list holds {len(o)} tensors for {len(inputs)} inputs"
                    )
                for out, inp in zip(o, inputs):
                    self._check_dtypes(out, inp)

        check()
        packed = (
            torch.cat([input_units(t).view(torch.uint8) for t in inputs])
            if inputs
            else torch.empty(0, dtype=torch.uint8, device=device)
        )
        sizes = [[t.numel() * t.element_size() for t in o] for o in outputs]
        gathered = torch.empty(sum(map(sum, sizes)), dtype=torch.uint8, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.allgather(packed, out=gathered, async_op=async_op)
            return [h] if async_op else None

        def finish():
            offset = 0
            for r, o in enumerate(outputs):
                for i, t in enumerate(o):
                    nbytes = sizes[r][i]
                    t.copy_(gathered[offset : offset + nbytes].view(t.dtype).view(t.shape))
                    offset += nbytes

        flat_outputs = [t for o in outputs for t in o]
        return self._issue("all_gather_coalesced", opts, flat_outputs, start, finish, device=device)

    def all_gather_single_coalesced(self, output_tensors, input_tensors, opts=None):
        return self._each(
            "all_gather_into_tensor_coalesced",
            opts,
            [(self.all_gather_single, (o, i)) for o, i in zip(output_tensors, input_tensors)],
        )

    # -- gather / scatter (alltoall with one non-zero row of splits) ----------

    @fails_on_every_rank("alltoall")
    def gather(self, output_tensors, input_tensors, opts=None):
        inp = one_tensor(input_tensors, "gather")
        root = getattr(opts, "rootRank", 0)
        outs = list(output_tensors[0]) if self._rank == root and output_tensors else []
        device = self._device([inp, *outs], "gather")

        self._check_root_list("gather", root, output_tensors, "output", inp)
        units = input_units(inp)
        splits = [0] * self._size
        splits[root] = units.numel()
        total = sum(unit_count(o) for o in outs)
        received = torch.empty(total, dtype=units.dtype, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.alltoall(units, splits=splits, out=received, async_op=async_op)
            return [h] if async_op else None

        finish = (lambda: store_pieces(received, outs)) if outs else None
        return self._issue("gather", opts, outs, start, finish, device=device)

    @fails_on_every_rank("alltoall")
    def scatter(self, output_tensors, input_tensors, opts=None):
        out = one_tensor(output_tensors, "scatter")
        root = getattr(opts, "rootRank", 0)
        pieces = list(input_tensors[0]) if self._rank == root and input_tensors else []
        device = self._device([out, *pieces], "scatter")

        self._check_root_list("scatter", root, input_tensors, "input", out)
        unit = unit_dtype(out.dtype)
        if pieces:
            send = torch.cat([input_units(p) for p in pieces])
            splits = [unit_count(p) for p in pieces]
        else:
            send = torch.empty(0, dtype=unit, device=device)
            splits = [0] * self._size
        comm = self._comm
        direct = output_units(out)
        target = direct if direct is not None else torch.empty(unit_count(out), dtype=unit, device=device)

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=target, async_op=async_op)
            return [h] if async_op else None

        finish = None if direct is not None else (lambda: store_units(target, out))
        return self._issue("scatter", opts, [out], start, finish, device=device)

    # -- alltoall ----------------------------------------------------------

    @fails_on_every_rank("alltoall")
    def alltoall(self, output_tensors, input_tensors, opts=None):
        outs, ins = list(output_tensors), list(input_tensors)
        device = self._device(outs + ins, "alltoall")

        def check():
            self._check_list(outs, "alltoall output list")
            self._check_list(ins, "alltoall input list")
            for o, i in zip(outs, ins):
                self._check_dtypes(o, i)

        check()
        send = torch.cat([input_units(t) for t in ins])
        splits = [unit_count(t) for t in ins]
        received = torch.empty(sum(unit_count(o) for o in outs), dtype=send.dtype, device=device)
        comm = self._comm

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=received, async_op=async_op)
            return [h] if async_op else None

        return self._issue("all_to_all", opts, outs, start, lambda: store_pieces(received, outs), device=device)

    @fails_on_every_rank("alltoall")
    def all_to_all_single(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts=None):
        """all_to_all_single: splits count rows of dim 0 (equal when empty)."""
        device = self._device([output_tensor, input_tensor], "all_to_all_single")
        in_splits = [int(s) for s in input_split_sizes] if input_split_sizes else None
        out_splits = [int(s) for s in output_split_sizes] if output_split_sizes else None

        def check():
            self._check_dtypes(output_tensor, input_tensor)
            rows = input_tensor.shape[0] if input_tensor.dim() else 1
            if in_splits is not None and (len(in_splits) != self._size or sum(in_splits) != rows):
                raise ValueError(
                    f"all_to_all_single: input_split_sizes {in_splits} do not split {rows} rows over {self._size} ranks"
                )
            if in_splits is None and rows % self._size:
                raise ValueError(
                    f"all_to_all_single: {rows} rows do not split evenly over "
                    f"{self._size} ranks; pass input_split_sizes"
                )
            out_rows = output_tensor.shape[0] if output_tensor.dim() else 1
            if out_splits is not None and (len(out_splits) != self._size or sum(out_splits) != out_rows):
                raise ValueError(
                    f"all_to_all_single: output_split_sizes {out_splits} do not split "
                    f"{out_rows} rows over {self._size} ranks"
                )

        check()
        rows = input_tensor.shape[0] if input_tensor.dim() else 1
        splits = in_splits if in_splits is not None else [rows // self._size] * self._size
        send = rows_view(plain(input_tensor).contiguous())
        direct = plain(output_tensor)
        direct = as_units(direct) if direct.is_contiguous() else None
        target = (
            direct
            if direct is not None
            else torch.empty(unit_count(output_tensor), dtype=unit_dtype(output_tensor.dtype), device=device)
        )
        comm = self._comm
        result = {}

        def start(async_op):
            h = comm.alltoall(send, splits=splits, out=target, async_op=async_op)
            if async_op:
                result["handle"] = h
                return [h]
            result["received"] = h[1]
            return None

        def finish():
            received = result["received"] if "received" in result else result["handle"].wait()[1]
            if out_splits is not None and list(received) != out_splits:
                raise _core.MismatchError(
                    f"all_to_all_single: rank {self._rank} received rows {list(received)} from the "
                    f"ranks but output_split_sizes is {out_splits}"
                )
            if direct is None:
                store_units(target, output_tensor)

        return self._issue("all_to_all_single", opts, [output_tensor], start, finish, device=device)

    # -- barrier -------------------------------------------------------------

    @fails_on_every_rank("barrier")
    def barrier(self, opts=None):
        comm = self._comm

        def start(async_op):
            h = comm.barrier(async_op=async_op)
            return [h] if async_op else None

        return self._issue("barrier", opts, [], start)

    # -- names torch used before 2.6 (and still accepts) ---------------------

    def _allgather_base(self, output_tensor, input_tensor, opts=None):
        return self.all_gather_single(output_tensor, input_tensor, opts)

    def alltoall_base(self, output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts=None):
        return self.all_to_all_single(output_tensor, input_tensor, output_split_sizes, input_split_sizes, opts)

    def allgather_into_tensor_coalesced(self, output_tensors, input_tensors, opts=None):
        return self.all_gather_single_coalesced(output_tensors, input_tensors, opts)
