// ringcc._core._OutputRows: the outputs of an adapter's out-of-place
// per-tensor calls where ringcc cannot make the framework's tensors itself
// (torch). A training loop calls such an allreduce once per small tensor;
// a framework allocation per output (and its free when the result dies)
// costs about as much as the collective's own per-tensor work. Here the
// adapter's factory makes a slab of rows at once (torch: one allocation,
// unbound into row tensors) and each call takes the next row, with no
// call into the framework.
//
// _OutputRows(factory, largest_bytes=4096, first_rows=8, max_rows=64,
// held_bytes=8 MiB): factory(source, k) returns (rows, address): k new
// tensors of source's dtype and shape lying one after another from
// `address` (k == 1: one tensor like source, for outputs larger than
// largest_bytes and 0-d ones, which get no slab). A (dtype, shape) kind's
// first slab has first_rows rows, each next one twice as many up to
// max_rows: a kind asked for often costs one factory call per max_rows
// results, one asked for once wastes few rows. A row keeps its slab alive,
// so a result that outlives its slab-mates holds at most max_rows times its
// own size; past held_bytes of rows not handed out, over all kinds, the
// slabs are let go of.
//
// Not tracked by Python's garbage collector: keep it out of reference
// cycles other than through module globals.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>

namespace ringcc_py {

// Where `obj` is an _OutputRows: a new row (new reference in *row, its
// memory at *ptr) for an output of `source`'s kind, of `ndim` dims
// `shape`, `bytes` bytes and core dtype `dtype`; true. False (nothing set)
// where obj is something else. Throws the factory's error, or a TypeError
// for what it returned.
bool take_output_row(PyObject* obj, PyObject* source, const int64_t* shape, size_t ndim, size_t bytes, int dtype,
                     PyObject** row, void** ptr);

// Registers the type as module._OutputRows.
void bind_output_rows(PyObject* module);

}  // namespace ringcc_py
