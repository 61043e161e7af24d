// Memory for the NumPy outputs that the per-tensor fast paths allocate (an
// out-of-place named allreduce or broadcast). A training loop asks for the
// same sizes every step and drops the previous step's outputs before the
// next: blocks go back to a free list of their size when their array dies
// and are handed out again, so the per-tensor path neither calls malloc nor
// touches the block (malloc's splitting and coalescing of 4 KiB chunks
// writes headers into memory that has gone cold since the last step).
#pragma once

#include <Python.h>

#include <cstddef>

namespace ringcc_py {

// A new C-contiguous NumPy array of the dtype and shape of `like` (an
// array that plain_numpy() took), of `bytes` bytes, whose memory comes from
// the free lists (a new reference; null with the Python error set). Large
// blocks and empty arrays come from NumPy.
PyObject* new_pooled_numpy_like(PyObject* like, size_t bytes);

// Bytes held in the free lists (for tests).
size_t pooled_output_bytes();

// Registers the type of the arrays' memory owner (call once, at import).
void bind_output_memory(PyObject* module);

// Makes the type `spec` describes and adds it to `module` as `attr`; the
// type lives as long as the process (its instances may outlive the module).
PyTypeObject* add_process_type(PyObject* module, const char* attr, PyType_Spec* spec);

}  // namespace ringcc_py
