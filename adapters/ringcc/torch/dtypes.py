"""The torch dtypes ringcc's core moves and reduces itself, derived once
from the core's own dtype codes (ringcc._core.DTYPE_CODES, which names
each by its torch name). Other dtypes move as bytes; see process_group/tensors.py.

A bottom module: it imports torch and the core, nothing of ringcc.torch."""

from __future__ import annotations

import torch

from ringcc import _core

# {torch dtype: the core's dtype code}
CORE_DTYPE_CODES = {getattr(torch, name): code for name, code in _core.DTYPE_CODES.items()}
CORE_DTYPES = frozenset(CORE_DTYPE_CODES)
