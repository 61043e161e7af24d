// Python bindings of the TCP rendezvous store and of the hashing helpers the
// tests use. Errors propagate as ringcc::Error; the module translates them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "bindings/errors.h"
#include "bindings/interpreter_exit.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/sha256.h"
#include "core/os/socket.h"
#include "core/rendezvous/tcp_store.h"

namespace py = pybind11;

namespace ringcc {
namespace {

// Seconds from Python (None = RINGCC_TIMEOUT_S), made finite and
// non-negative; capped at a year so that deadlines cannot overflow.
double timeout_or_default(std::optional<double> seconds) {
  double s = seconds.has_value() ? *seconds : timeout_seconds();
  RINGCC_CHECK(!std::isnan(s), ErrorKind::kInvalidArgument, "timeout must be a number, got nan");
  return std::clamp(s, 0.0, 365.0 * 24 * 3600);
}

py::bytes digest_bytes(const Digest& d) { return py::bytes(reinterpret_cast<const char*>(d.data()), d.size()); }

}  // namespace
}  // namespace ringcc

void bind_store(py::module_& m) {
  using namespace ringcc;

  py::class_<TcpStoreServer, std::shared_ptr<TcpStoreServer>>(
      m, "TcpStoreServer",
      "The rendezvous store served by rank 0 from a background thread. port=0 picks a free "
      "port; a non-empty secret makes every client authenticate.")
      .def(py::init<const std::string&, int, const std::string&>(), py::arg("host"), py::arg("port"),
           py::arg("secret") = py::bytes(""))
      .def_property_readonly("port", &TcpStoreServer::port);

  py::class_<TcpStore, std::shared_ptr<TcpStore>>(
      m, "TcpStore",
      "A client of a TcpStoreServer. Connecting retries until `timeout` seconds pass "
      "(default RINGCC_TIMEOUT_S).")
      .def(py::init([](const std::string& host, int port, const std::string& secret, std::optional<double> timeout) {
             Deadline deadline = deadline_after(timeout_or_default(timeout));
             ringcc_py::BlockingCall call;
             return std::make_shared<TcpStore>(host, port, secret, deadline);
           }),
           py::arg("host"), py::arg("port"), py::arg("secret") = py::bytes(""), py::arg("timeout") = py::none())
      .def(
          "set",
          [](TcpStore& store, const std::string& key, const std::string& value) {
            ringcc_py::GilRelease release;
            store.set(key, value);
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](TcpStore& store, const std::string& key, std::optional<double> timeout) {
            auto ms = std::chrono::milliseconds(static_cast<int64_t>(std::llround(timeout_or_default(timeout) * 1000)));
            std::string value;
            {
              ringcc_py::BlockingCall call;
              value = store.get(key, ms);
            }
            return py::bytes(value);
          },
          py::arg("key"), py::arg("timeout") = py::none(),
          "Waits until key is set (at most `timeout` seconds) and returns its value.")
      .def(
          "try_get",
          [](TcpStore& store, const std::string& key) -> py::object {
            std::string value;
            bool found;
            {
              ringcc_py::GilRelease release;
              found = store.try_get(key, &value);
            }
            if (!found) return py::none();
            return py::bytes(value);
          },
          py::arg("key"))
      .def(
          "add",
          [](TcpStore& store, const std::string& key, int64_t delta) {
            ringcc_py::GilRelease release;
            return store.add(key, delta);
          },
          py::arg("key"), py::arg("delta"))
      .def_property_readonly("local_address", &TcpStore::local_address);

  m.def(
      "_hmac_sha256",
      [](const std::string& key, const std::string& data) {
        return digest_bytes(hmac_sha256(key, data.data(), data.size()));
      },
      py::arg("key"), py::arg("data"));
  m.def(
      "_sha256", [](const std::string& data) { return digest_bytes(sha256(data.data(), data.size())); },
      py::arg("data"));
}
