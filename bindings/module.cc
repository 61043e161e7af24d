// The extension module ringcc._core.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/errors.h"
#include "bindings/interpreter_exit.h"
#include "core/os/mpi_library.h"
#include "core/os/net_interface.h"

namespace py = pybind11;

void bind_reduction(py::module_& m);
void bind_store(py::module_& m);
void bind_jax_ffi(py::module_& m);  // bindings/jax_ffi.cc: XLA FFI handlers for ringcc.jax
void bind_kernel_api(py::module_& m);  // bindings/kernel_api.cc: named collectives for other kernel libraries

namespace ringcc_py {
void bind_collectives(py::module_& m);
void bind_device(py::module_& m);  // bindings/device_bindings.cc: CUDA, NCCL and NVRTC found at run time
}  // namespace ringcc_py

PYBIND11_MODULE(_core, m) {
  m.doc() = "ringcc's C++ core: transports, collectives, reductions.";
  ringcc_py::bind_errors(m);
  // Its atexit hook, registered now, runs after those of the Python package
  // and its adapters (registered later, run earlier).
  ringcc_py::bind_interpreter_exit(m);
  ringcc_py::install_interrupt_hook();
  ringcc_py::bind_collectives(m);
  bind_reduction(m);
  bind_store(m);
  bind_jax_ffi(m);
  bind_kernel_api(m);
  ringcc_py::bind_device(m);
  m.def(
      "_socket_interface",
      [] {
        const ringcc::SocketInterface chosen = ringcc::socket_interface_from_env();
        py::dict d;
        d["variable"] = chosen.variable;
        d["spec"] = chosen.spec;
        d["interface"] = chosen.interface;
        d["address"] = chosen.address;
        return d;
      },
      "The interface RINGCC_SOCKET_IFNAME (or HOROVOD_GLOO_IFACE, GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME) "
      "chooses on this host, as the links would use it.");
  m.def("build_info", [] {
    py::dict info;
    info["version"] = RINGCC_VERSION;
    py::dict transports;
    transports["shm"] = true;
    transports["tcp"] = true;
    transports["mpi"] = ringcc::mpi_plugin_info().loaded;  // the MPI plugin loads
    transports["nccl"] = false;
    info["transports"] = transports;
#ifdef RINGCC_WITH_JAX_FFI
    info["jax_ffi"] = true;  // ringcc.jax's XLA FFI handlers are built in
#else
    info["jax_ffi"] = false;
#endif
    return info;
  });
}
