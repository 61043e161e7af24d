// The extension module ringcc._core.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/errors.h"

namespace py = pybind11;

void bind_reduction(py::module_& m);
void bind_store(py::module_& m);

namespace ringcc_py {
void bind_collectives(py::module_& m);
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "ringcc's C++ core: transports, collectives, reductions.";
  ringcc_py::bind_errors(m);
  ringcc_py::bind_collectives(m);
  bind_reduction(m);
  bind_store(m);
  m.def("build_info", [] {
    py::dict info;
    info["version"] = RINGCC_VERSION;
    py::dict transports;
    transports["shm"] = true;
    transports["tcp"] = true;
    transports["mpi"] = false;
    transports["nccl"] = false;
    info["transports"] = transports;
    return info;
  });
}
