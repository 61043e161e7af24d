// Python exception classes for the core's errors, and the translator.
#pragma once

#include <pybind11/pybind11.h>

namespace ringcc_py {

// Creates RingccError and its subclasses in module m and installs the
// translator from ringcc::Error.
void bind_errors(pybind11::module_& m);

// Raises (sets and throws error_already_set) the Python class for kind.
[[noreturn]] void throw_python(int kind, const std::string& message);

// Sets the Python error for the C++ exception being handled: for the
// functions written against the CPython API. Call only inside a catch.
void set_python_error();

}  // namespace ringcc_py
