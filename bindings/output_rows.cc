#include "bindings/output_rows.h"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings/fastcall_args.h"
#include "bindings/output_memory.h"

namespace py = pybind11;

namespace ringcc_py {

namespace {

// One (dtype, shape) kind's slab: its rows not handed out yet (owned
// references; null once handed out), from `next` on.
struct Slab {
  std::vector<PyObject*> rows;
  size_t next = 0;
  char* base = nullptr;
  size_t row_bytes = 0;

  Slab() = default;
  Slab(Slab&&) = default;
  Slab& operator=(Slab&&) = default;
  Slab(const Slab&) = delete;
  Slab& operator=(const Slab&) = delete;
  ~Slab() { release(); }

  size_t unused_bytes() const { return (rows.size() - next) * row_bytes; }
  void release() {
    std::vector<PyObject*> left;
    left.swap(rows);
    next = 0;
    for (PyObject* r : left) Py_XDECREF(r);
  }
};

// A kind's current slab and how many rows its next one gets: a kind asked
// for often earns larger slabs (fewer factory calls a row), one asked for
// once wastes few rows.
struct Kind {
  Slab slab;
  size_t next_rows = 0;
};

struct OutputRowsObject {
  PyObject_HEAD PyObject* factory;
  size_t largest_bytes;
  size_t first_rows;
  size_t max_rows;
  size_t held_max;  // bytes of unused rows kept over all kinds
  size_t held;
  std::unordered_map<std::string, Kind>* kinds;
};

PyTypeObject* g_type = nullptr;

// The rows factory(source, k) made: k owned references and their address.
Slab make_slab(OutputRowsObject& self, PyObject* source, size_t k, size_t row_bytes) {
  py::object made = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(self.factory, "On", source, static_cast<Py_ssize_t>(k)));
  if (!made) throw py::error_already_set();
  if (!PyTuple_Check(made.ptr()) || PyTuple_GET_SIZE(made.ptr()) != 2) {
    throw py::type_error("_OutputRows: the factory must return (rows, address)");
  }
  py::object rows = py::reinterpret_steal<py::object>(
      PySequence_Fast(PyTuple_GET_ITEM(made.ptr(), 0), "_OutputRows: the factory's rows must be a sequence"));
  if (!rows) throw py::error_already_set();
  if (static_cast<size_t>(PySequence_Fast_GET_SIZE(rows.ptr())) != k) {
    throw py::type_error("_OutputRows: the factory returned " + std::to_string(PySequence_Fast_GET_SIZE(rows.ptr())) +
                         " rows, not " + std::to_string(k));
  }
  void* base = PyLong_AsVoidPtr(PyTuple_GET_ITEM(made.ptr(), 1));
  if (!base && PyErr_Occurred()) throw py::error_already_set();
  if (!base && row_bytes > 0) throw py::type_error("_OutputRows: the factory returned a null address");
  Slab slab;
  slab.base = static_cast<char*>(base);
  slab.row_bytes = row_bytes;
  slab.rows.reserve(k);
  PyObject** items = PySequence_Fast_ITEMS(rows.ptr());
  for (size_t i = 0; i < k; ++i) {
    Py_INCREF(items[i]);
    slab.rows.push_back(items[i]);
  }
  return slab;
}

PyObject* hand_out(Slab& slab, void** ptr) {
  const size_t i = slab.next++;
  PyObject* row = slab.rows[i];
  slab.rows[i] = nullptr;
  *ptr = slab.base + i * slab.row_bytes;
  return row;
}

void drop_slabs(OutputRowsObject& self) {
  // Moved out first: a row's release may run code that takes rows.
  std::unordered_map<std::string, Kind> old;
  old.swap(*self.kinds);
  self.held = 0;
  for (auto& kv : old) kv.second.slab.release();
}

PyObject* output_rows_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"factory", "largest_bytes", "first_rows", "max_rows", "held_bytes", nullptr};
  PyObject* factory = nullptr;
  Py_ssize_t largest_bytes = 4096, first_rows = 8, max_rows = 64, held_bytes = Py_ssize_t{8} << 20;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|nnnn:_OutputRows", const_cast<char**>(names), &factory,
                                   &largest_bytes, &first_rows, &max_rows, &held_bytes)) {
    return nullptr;
  }
  if (!PyCallable_Check(factory)) {
    PyErr_SetString(PyExc_TypeError, "_OutputRows: factory must be callable");
    return nullptr;
  }
  if (largest_bytes < 0 || first_rows < 1 || max_rows < first_rows || held_bytes < 0) {
    PyErr_SetString(PyExc_ValueError,
                    "_OutputRows: needs largest_bytes >= 0, 1 <= first_rows <= max_rows and held_bytes >= 0");
    return nullptr;
  }
  auto* self = reinterpret_cast<OutputRowsObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  Py_INCREF(factory);
  self->factory = factory;
  self->largest_bytes = static_cast<size_t>(largest_bytes);
  self->first_rows = static_cast<size_t>(first_rows);
  self->max_rows = static_cast<size_t>(max_rows);
  self->held_max = static_cast<size_t>(held_bytes);
  self->held = 0;
  self->kinds = new std::unordered_map<std::string, Kind>();
  return reinterpret_cast<PyObject*>(self);
}

void output_rows_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<OutputRowsObject*>(obj);
  if (self->kinds) {
    drop_slabs(*self);
    delete self->kinds;
  }
  Py_XDECREF(self->factory);
  PyTypeObject* type = Py_TYPE(obj);
  type->tp_free(obj);
  Py_DECREF(type);  // an instance of a heap type holds a reference to it
}

// _OutputRows.take(source, shape, dtype, item_size) -> (row, address): the row a call
// for an output like `source` gets (for tests).
PyObject* output_rows_take(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "take(source, shape, dtype, item_size) takes 4 arguments");
    return nullptr;
  }
  try {
    py::tuple shape = py::reinterpret_borrow<py::tuple>(args[1]);
    std::vector<int64_t> dims;
    const int dtype = py::cast<int>(py::handle(args[2]));
    size_t bytes = py::cast<size_t>(py::handle(args[3]));
    for (py::handle d : shape) {
      dims.push_back(py::cast<int64_t>(d));
      bytes *= static_cast<size_t>(dims.back());
    }
    PyObject* row = nullptr;
    void* ptr = nullptr;
    take_output_row(obj, args[0], dims.data(), dims.size(), bytes, dtype, &row, &ptr);
    return py::make_tuple(py::reinterpret_steal<py::object>(row), reinterpret_cast<uintptr_t>(ptr)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
    return nullptr;
  }
}

// _OutputRows.held() -> (kinds, bytes): the kinds with a slab and the
// bytes of their rows not handed out (for tests).
PyObject* output_rows_held(PyObject* obj, PyObject*) {
  const auto& self = *reinterpret_cast<OutputRowsObject*>(obj);
  return Py_BuildValue("nn", static_cast<Py_ssize_t>(self.kinds->size()), static_cast<Py_ssize_t>(self.held));
}

PyMethodDef g_methods[] = {
    {"take", method_of(output_rows_take), METH_FASTCALL,
     "take(source, shape, dtype, item_size) -> (row, address): the next output row for `source`\n"
     "(shape a tuple, dtype a core dtype code; for tests)."},
    {"held", output_rows_held, METH_NOARGS, "held() -> (kinds, bytes of rows not handed out) (tests)."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

bool take_output_row(PyObject* obj, PyObject* source, const int64_t* shape, size_t ndim, size_t bytes, int dtype,
                     PyObject** row, void** ptr) {
  if (Py_TYPE(obj) != g_type) return false;
  OutputRowsObject& self = *reinterpret_cast<OutputRowsObject*>(obj);
  if (bytes == 0 || bytes > self.largest_bytes || ndim == 0) {
    Slab one = make_slab(self, source, 1, bytes);
    *row = hand_out(one, ptr);
    return true;
  }
  std::string key(1 + ndim * sizeof(int64_t), '\0');
  key[0] = static_cast<char>(dtype);
  std::memcpy(&key[1], shape, ndim * sizeof(int64_t));
  auto it = self.kinds->find(key);
  if (it != self.kinds->end() && it->second.slab.next < it->second.slab.rows.size()) {
    *row = hand_out(it->second.slab, ptr);
    self.held -= bytes;
    return true;
  }
  const size_t rows = it != self.kinds->end() ? it->second.next_rows : self.first_rows;
  Slab fresh = make_slab(self, source, rows, bytes);
  *row = hand_out(fresh, ptr);
  // Looked up again: the factory ran Python code, other threads too.
  it = self.kinds->find(key);
  if (it == self.kinds->end()) {
    it = self.kinds->emplace(std::move(key), Kind{}).first;
    it->second.next_rows = self.first_rows;
  }
  Kind& kind = it->second;
  Slab spent = std::move(kind.slab);
  self.held -= spent.unused_bytes();
  kind.slab = std::move(fresh);
  kind.next_rows = std::min(self.max_rows, kind.next_rows * 2);
  self.held += kind.slab.unused_bytes();
  spent.release();
  if (self.held > self.held_max) drop_slabs(self);
  return true;
}

void bind_output_rows(PyObject* module) {
  static PyType_Slot slots[] = {
      {Py_tp_new, reinterpret_cast<void*>(output_rows_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(output_rows_dealloc)},
      {Py_tp_methods, g_methods},
      {Py_tp_doc, const_cast<char*>("_OutputRows(factory, largest_bytes=4096, first_rows=8, max_rows=64, "
                                    "held_bytes=8 MiB): outputs of out-of-place per-tensor calls, taken from "
                                    "slabs of rows.")},
      {0, nullptr},
  };
  PyType_Spec spec = {"ringcc._OutputRows", static_cast<int>(sizeof(OutputRowsObject)), 0, Py_TPFLAGS_DEFAULT, slots};
  g_type = add_process_type(module, "_OutputRows", &spec);
}

}  // namespace ringcc_py
