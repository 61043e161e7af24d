// Errors raised by the core. Every failure the user can cause or meet
// (bad input, mismatched ranks, dead peers, timeouts) is an Error with a kind,
// so the bindings can map it to a precise Python exception.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ringcc {

enum class ErrorKind {
  kInvalidArgument,  // bad dtype, non-contiguous memory, bad root, bad sizes on this rank
  kUnsupportedType,  // a dtype the core cannot reduce or move
  kMismatch,         // ranks disagree on op, dtype, count or root
  kPeerFailure,      // a peer died, closed its connection or aborted
  kTimeout,          // a bounded wait ran out (RINGCC_TIMEOUT_S)
  kNotInitialized,   // use before init() or after shutdown()
  kInternal,         // a system call failed or an invariant broke
  kInterrupted,      // a signal handler raised while this thread waited (core/base/interrupt.h)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void raise(ErrorKind kind, Args&&... args) {
  throw Error(kind, detail::concat(std::forward<Args>(args)...));
}

}  // namespace ringcc

#define RINGCC_CHECK(cond, kind, ...)                  \
  do {                                                 \
    if (!(cond)) ::ringcc::raise((kind), __VA_ARGS__); \
  } while (0)
