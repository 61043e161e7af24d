#include "bindings/output_memory.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

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
