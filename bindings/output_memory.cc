#include "bindings/output_memory.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "bindings/buffer_view.h"

namespace py = pybind11;

namespace ringcc_py {

namespace {

// Larger outputs amortize malloc over their copies.
constexpr size_t kPooledBlockMax = size_t{1} << 20;
// At most this much memory waits in the free lists; past it, blocks of
// dead arrays are freed.
constexpr size_t kPooledBytesMax = size_t{64} << 20;
constexpr size_t kBlockAlign = 64;

// Free blocks by size (a multiple of kBlockAlign). Touched only with the
// GIL held: arrays are made and die under it.
struct FreeLists {
  std::unordered_map<size_t, std::vector<void*>> by_size;
  size_t bytes = 0;
};

FreeLists& free_lists() {
  static auto* lists = new FreeLists();  // never destroyed: arrays may die at exit
  return *lists;
}

void* take_block(size_t size) {
  FreeLists& lists = free_lists();
  auto it = lists.by_size.find(size);
  if (it != lists.by_size.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    lists.bytes -= size;
    return p;
  }
  return std::aligned_alloc(kBlockAlign, size);
}

void give_block(void* p, size_t size) {
  FreeLists& lists = free_lists();
  if (lists.bytes + size > kPooledBytesMax) {
    std::free(p);
    return;
  }
  lists.by_size[size].push_back(p);
  lists.bytes += size;
}

// The owner (NumPy base object) of a pooled array's memory.
struct OutputMemory {
  PyObject_HEAD void* ptr;
  size_t size;
};

PyTypeObject* g_type = nullptr;

void output_memory_dealloc(PyObject* self) {
  auto* m = reinterpret_cast<OutputMemory*>(self);
  if (m->ptr) give_block(m->ptr, m->size);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // an instance of a heap type holds a reference to it
}

}  // namespace

PyObject* new_pooled_numpy_like(PyObject* like, size_t bytes) {
  if (bytes == 0 || bytes > kPooledBlockMax || !g_type) return new_numpy_like(like);
  auto& api = py::detail::npy_api::get();
  const auto* a = py::detail::array_proxy(like);
  const size_t size = (bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
  auto* owner = PyObject_New(OutputMemory, g_type);
  if (!owner) return nullptr;
  owner->ptr = take_block(size);
  owner->size = size;
  if (!owner->ptr) {
    Py_DECREF(owner);
    return PyErr_NoMemory();
  }
  Py_INCREF(a->descr);  // PyArray_NewFromDescr takes a reference to it
  PyObject* array =
      api.PyArray_NewFromDescr_(api.PyArray_Type_, a->descr, a->nd, a->dimensions, nullptr, owner->ptr,
                                py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                                    py::detail::npy_api::NPY_ARRAY_WRITEABLE_,
                                nullptr);
  if (!array) {
    Py_DECREF(owner);
    return nullptr;
  }
  if (api.PyArray_SetBaseObject_(array, reinterpret_cast<PyObject*>(owner)) != 0) {  // steals owner
    Py_DECREF(array);
    return nullptr;
  }
  return array;
}

size_t pooled_output_bytes() { return free_lists().bytes; }

namespace {

// Outputs kept by name: past this many bytes the table starts over (names
// that are new every step fill it; they are never asked for again).
constexpr size_t kNamedBytesMax = size_t{32} << 20;

struct NamedOutputs {
  PyObject* by_name = nullptr;  // str -> the name's last output
  size_t bytes = 0;
  uint64_t reuses = 0;
};

NamedOutputs& named_outputs() {
  static auto* outputs = new NamedOutputs();  // never destroyed: arrays may die at exit
  return *outputs;
}

// The block behind a pooled array, or null.
const OutputMemory* memory_of(PyObject* array) {
  PyObject* base = py::detail::array_proxy(array)->base;
  return base && Py_TYPE(base) == g_type ? reinterpret_cast<const OutputMemory*>(base) : nullptr;
}

// Whether the kept output `kept` may be handed out again for an output
// like `like`: the table holds its only reference (so no view, buffer
// export or other array refers to it), no weak reference could see its
// memory change, and it is still the plain array it was made as.
bool reusable(PyObject* kept, PyObject* like) {
  if (Py_REFCNT(kept) != 1) return false;
  auto& api = py::detail::npy_api::get();
  PyTypeObject* type = Py_TYPE(kept);
  if (type != reinterpret_cast<PyTypeObject*>(api.PyArray_Type_)) return false;
  if (type->tp_weaklistoffset > 0 &&
      *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(kept) + type->tp_weaklistoffset) != nullptr) {
    return false;
  }
  const auto* k = py::detail::array_proxy(kept);
  const auto* l = py::detail::array_proxy(like);
  constexpr int kFlags = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                         py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  if (k->descr != l->descr || k->nd != l->nd || (k->flags & kFlags) != kFlags || !memory_of(kept)) return false;
  return std::equal(k->dimensions, k->dimensions + k->nd, l->dimensions);
}

}  // namespace

PyObject* named_numpy_output(PyObject* name, PyObject* like, size_t bytes) {
  if (bytes == 0 || bytes > kPooledBlockMax || !g_type) return new_pooled_numpy_like(like, bytes);
  NamedOutputs& named = named_outputs();
  if (!named.by_name && !(named.by_name = PyDict_New())) return nullptr;
  PyObject* kept = PyDict_GetItemWithError(named.by_name, name);  // borrowed
  if (kept && reusable(kept, like)) {
    ++named.reuses;
    Py_INCREF(kept);
    return kept;
  }
  if (!kept && PyErr_Occurred()) return nullptr;
  PyObject* out = new_pooled_numpy_like(like, bytes);
  if (!out) return nullptr;
  const OutputMemory* replaced = kept ? memory_of(kept) : nullptr;
  const size_t gone = replaced ? replaced->size : 0;
  const OutputMemory* mine = memory_of(out);
  const size_t size = mine ? mine->size : 0;
  if (named.bytes - gone + size > kNamedBytesMax) {
    PyDict_Clear(named.by_name);  // the dead ones go back to the free lists
    named.bytes = 0;
  } else {
    named.bytes -= gone;
  }
  // Keeping it is an optimization: an output that could not be kept is
  // still the call's output.
  if (PyDict_SetItem(named.by_name, name, out) == 0) {
    named.bytes += size;
  } else {
    PyErr_Clear();
  }
  return out;
}

size_t named_output_bytes() { return named_outputs().bytes; }

uint64_t named_output_reuses() { return named_outputs().reuses; }

void bind_output_memory(PyObject* module) {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(output_memory_dealloc)},
      {Py_tp_doc, const_cast<char*>("The memory of an output array ringcc allocated (reused once the array dies).")},
      {0, nullptr},
  };
  PyType_Spec spec = {"ringcc._OutputMemory", static_cast<int>(sizeof(OutputMemory)), 0, Py_TPFLAGS_DEFAULT, slots};
  g_type = add_process_type(module, "_OutputMemory", &spec);
}

PyTypeObject* add_process_type(PyObject* module, const char* attr, PyType_Spec* spec) {
  PyObject* type = PyType_FromSpec(spec);
  if (!type) throw py::error_already_set();
  Py_INCREF(type);                                   // kept for the process
  if (PyModule_AddObject(module, attr, type) != 0) {  // steals a reference on success
    Py_DECREF(type);
    throw py::error_already_set();
  }
  return reinterpret_cast<PyTypeObject*>(type);
}

}  // namespace ringcc_py
