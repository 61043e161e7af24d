"""The results of the out-of-place direct paths (`hvd.allreduce_async`,
`hvd.broadcast_async`, their process-set forms) for small CPU tensors:
rows of slabs, one allocation for many results (bindings/output_rows.h).

A row is an ordinary tensor of its own shape: contiguous, not a view in
autograd's sense (`unsafe_split_with_sizes`: its own version counter, no
`_base`), so in-place ops on one result never trouble another's autograd
graph. Its storage is the slab's, at an offset, which shows in three ways:
- a result that outlives its slab-mates keeps the slab (up to 64 results
  of at most 4 KiB) alive, and `torch.save` of it writes the slab;
- the slab's memory comes from `torch.from_numpy`, so a row cannot be
  resized past its slab ("Trying to resize storage that is not
  resizable") instead of moving its slab-mates' memory while their
  collectives may still be writing it;
- results larger than 4 KiB, and 0-d ones, are `torch.empty_like` tensors.
"""

from __future__ import annotations

import numpy as np
import torch

from ringcc import _core


def new_rows(source: torch.Tensor, k: int):
    """k new tensors of `source`'s dtype and shape, one after another in
    memory, and the address of the first (k == 1: one like `source`)."""
    if k == 1:
        out = torch.empty_like(source)
        return (out,), out.data_ptr()
    shape = source.shape
    # NumPy's memory, not torch's: not zeroed, and a tensor over it cannot
    # be resized (torch.from_numpy); viewed as the dtype (bfloat16 too).
    slab = torch.from_numpy(np.empty(k * source.nbytes, np.uint8)).view(source.dtype)
    if len(shape) > 1:
        slab = slab.view(k * shape[0], *shape[1:])
    return slab.unsafe_split_with_sizes([shape[0]] * k), slab.data_ptr()


MAX_ROWS = 64
LARGEST_BYTES = 4096
OUTPUT_ROWS = _core._OutputRows(new_rows, largest_bytes=LARGEST_BYTES, max_rows=MAX_ROWS)
