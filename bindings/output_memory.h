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
#include <cstdint>

namespace ringcc_py {

// A new C-contiguous NumPy array of the dtype and shape of `like` (an
// array that plain_numpy() took), of `bytes` bytes, whose memory comes from
// the free lists (a new reference; null with the Python error set). Large
// blocks and empty arrays come from NumPy.
PyObject* new_pooled_numpy_like(PyObject* like, size_t bytes);

// Bytes held in the free lists (for tests).
size_t pooled_output_bytes();

// The output of a named out-of-place collective of `like` (`bytes` bytes):
// the last output made under `name` again when nothing else refers to it
// any more (no reference, view, weak reference or buffer export, and its
// shape, dtype and flags as they were made), else a new pooled array,
// which becomes the one kept for the name. A training step names the same
// tensors every step and drops their results before the next: this saves
// it making and freeing an array per tensor. At most kNamedBytesMax bytes
// of outputs are kept (a new reference; null with the Python error set).
PyObject* named_numpy_output(PyObject* name, PyObject* like, size_t bytes);

// Bytes of the outputs kept by name, and how many times one was given
// again (for tests).
size_t named_output_bytes();
uint64_t named_output_reuses();

// Registers the type of the arrays' memory owner (call once, at import).
void bind_output_memory(PyObject* module);

// Makes the type `spec` describes and adds it to `module` as `attr`; the
// type lives as long as the process (its instances may outlive the module).
PyTypeObject* add_process_type(PyObject* module, const char* attr, PyType_Spec* spec);

}  // namespace ringcc_py
