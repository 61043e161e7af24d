// What unwinds a thread that ends by pthread_exit() (CPython ends threads
// that take the GIL while the interpreter finalizes that way) or by
// cancellation. The unwinding must go on to the thread's start: a
// catch (...) that could see it catches this first and rethrows,
//
//   } catch (const ThreadExit&) {
//     throw;
//   } catch (...) {
//
// or the C++ runtime aborts the process when the handler ends.
#pragma once

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace ringcc {

#if defined(__GLIBCXX__)
using ThreadExit = abi::__forced_unwind;
#else
// Other runtimes end threads without an exception a handler could catch.
struct ThreadExit {};
#endif

}  // namespace ringcc
