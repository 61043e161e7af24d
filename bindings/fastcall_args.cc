#include "bindings/fastcall_args.h"

#include <string>

namespace ringcc_py {

FastcallParams::FastcallParams(const char* func, std::initializer_list<const char*> names, int positional, int required)
    : func_(func), positional_(positional), required_(required) {
  for (const char* n : names) names_.push_back(PyUnicode_InternFromString(n));
}

bool FastcallParams::bind_impl(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject*** out,
                               size_t n_out, bool raise) const {
  const Py_ssize_t n = static_cast<Py_ssize_t>(n_out);
  if (nargs > positional_) {
    if (raise) {
      PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional argument%s (%zd given)", func_, positional_,
                   positional_ == 1 ? "" : "s", nargs);
    }
    return false;
  }
  bool given[16] = {};
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    *out[i] = args[i];
    given[i] = true;
  }
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t j = 0;
    while (j < n && names_[static_cast<size_t>(j)] != key) ++j;
    if (j == n) {  // not the interned string: compare the text
      j = 0;
      while (j < n && PyUnicode_Compare(names_[static_cast<size_t>(j)], key) != 0) ++j;
    }
    if (j == n) {
      if (raise) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func_, key);
      }
      return false;
    }
    if (given[j]) {
      if (raise) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", func_, key);
      }
      return false;
    }
    *out[j] = args[nargs + k];
    given[j] = true;
  }
  for (int j = 0; j < required_; ++j) {
    if (!given[j]) {
      if (raise) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument '%U'", func_, names_[static_cast<size_t>(j)]);
      }
      return false;
    }
  }
  return true;
}

}  // namespace ringcc_py
