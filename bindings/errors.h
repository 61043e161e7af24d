// Python exception classes for the core's errors, and the translator.
#pragma once

#include <pybind11/pybind11.h>

#include "bindings/interpreter_exit.h"
#include "core/base/error.h"
#include "core/base/interrupt.h"

namespace ringcc_py {

// Creates RingccError and its subclasses in module m and installs the
// translator from ringcc::Error.
void bind_errors(pybind11::module_& m);

// The name of the Python class a core error of `kind` becomes
// ("ringcc.MismatchError", "KeyboardInterrupt", ...), for messages written
// where Python cannot be reached (kernels of other libraries, XLA's
// handlers), which name the class so the caller can raise it. Needs no GIL.
const char* python_class_name(ringcc::ErrorKind kind);

// Raises (sets and throws error_already_set) the Python class for kind.
[[noreturn]] void throw_python(int kind, const std::string& message);

// Sets the Python error for the C++ exception being handled: for the
// functions written against the CPython API. Call only inside a catch.
// The unwinding of a thread that ends (pthread_exit) goes on through it.
void set_python_error();

// Makes the core's waits on the interpreter's main thread run pending
// signal handlers every ~50 ms (core/base/interrupt.h); a handler's exception
// ends the wait and is raised in place of the core's kInterrupted error.
void install_interrupt_hook();

// A blocking call into the core: releases the GIL (taken back behind the
// interpreter's exit gate, interpreter_exit.h) and, on the main thread,
// lets signal handlers interrupt the call's waits.
class BlockingCall {
 public:
  BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;

 private:
  GilRelease release_;
  ringcc::InterruptibleWait interruptible_;
};

// True on the interpreter's main thread (the one that runs signal handlers).
bool on_main_thread();

// Raises Error(kInvalidArgument) in a signal handler that interrupted a
// blocking call of the core (BlockingCall checks it too).
void check_not_in_signal_handler();

}  // namespace ringcc_py
