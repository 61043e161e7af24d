// The per-tensor entry points of training loops, written against the
// CPython API (pybind11's dispatcher and instance registry cost more than
// the work): the fast paths of ringcc.allreduce_async(_) and
// broadcast_async(_), which take the common call and hand every other to
// the Python implementation, and the raw entry points through which
// adapters pass memory they described themselves.
#pragma once

#include <pybind11/pybind11.h>

namespace ringcc_py {

// Adds synchronize, poll, the raw entry points, DTYPE_CODES and the
// factories of the fast paths (_allreduce_async_inplace, _fast_path) to m.
void bind_fast_paths(pybind11::module_& m);

}  // namespace ringcc_py
