// Arguments of functions written against the CPython vectorcall protocol
// (METH_FASTCALL | METH_KEYWORDS): the per-tensor paths, where pybind11's
// dispatcher cost more than the work. Binds positional and keyword
// arguments to named parameters as Python would.
#pragma once

#include <Python.h>

#include <initializer_list>
#include <vector>

namespace ringcc_py {

// A vectorcall function as a PyMethodDef's ml_meth, whose declared type
// it does not have (CPython calls it by the flags beside it).
template <class F>
inline PyCFunction method_of(F* function) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

class FastcallParams {
 public:
  // func names the function in errors; names lists its parameters in
  // order, of which the first `positional` may come by position and the
  // first `required` must be given.
  FastcallParams(const char* func, std::initializer_list<const char*> names, int positional, int required);

  // Stores each given argument (borrowed) into its slot; slots of
  // parameters not given keep what they held. On bad arguments: false with
  // a TypeError set.
  template <class... Slots>
  bool bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Slots... slots) const {
    PyObject** out[] = {slots...};
    return bind_impl(args, nargs, kwnames, out, sizeof...(Slots), true);
  }
  // The same without raising: false when the arguments do not bind.
  template <class... Slots>
  bool try_bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Slots... slots) const {
    PyObject** out[] = {slots...};
    return bind_impl(args, nargs, kwnames, out, sizeof...(Slots), false);
  }

 private:
  bool bind_impl(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject*** out, size_t n_out,
                 bool raise) const;

  const char* func_;
  std::vector<PyObject*> names_;  // interned, never released
  int positional_;
  int required_;
};

}  // namespace ringcc_py
