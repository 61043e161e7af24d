// What ringcc found of the CUDA driver, NCCL and NVRTC (all loaded at run
// time, core/device/gpu_libraries.h), for ringcc.cuda_info(),
// ringcc.nccl_info() and ringrun --check-build, plus the hooks the tests of
// the device kernels use (NVRTC runs without a GPU).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/device_arrays.h"
#include "bindings/interpreter_exit.h"
#include "core/backends/registry.h"
#include "core/base/error.h"
#include "core/device/cuda_device.h"
#include "core/device/gpu_libraries.h"
#include "core/device/gpu_report.h"
#include "core/device/kernel_cache.h"

namespace py = pybind11;
using ringcc::device::GpuLibrary;

namespace ringcc_py {

namespace {

GpuLibrary library_of(const std::string& name) {
  if (name == "cuda") return GpuLibrary::kCuda;
  if (name == "nccl") return GpuLibrary::kNccl;
  if (name == "nvrtc") return GpuLibrary::kNvrtc;
  ringcc::raise(ringcc::ErrorKind::kInvalidArgument, "unknown GPU library '", name, "' (cuda, nccl or nvrtc)");
}

py::dict info_dict(const ringcc::device::GpuLibraryInfo& info, GpuLibrary which) {
  py::dict d;
  d["found"] = info.found;
  d["path"] = info.path;
  d["version"] = info.version;
  d["version_code"] = info.version_code;
  d["error"] = info.error;
  d["tried"] = info.tried;
  d["test_double"] = info.test_double;
  d["hint"] = ringcc::device::install_hint(which);
  return d;
}

py::dict device_dict(const ringcc::device::DeviceProperties& p) {
  py::dict d;
  d["index"] = p.ordinal;
  d["name"] = p.name;
  d["uuid"] = p.uuid;
  d["pci_bus_id"] = p.pci_bus_id;
  d["compute_capability"] = py::make_tuple(p.cc_major, p.cc_minor);
  d["multiprocessors"] = p.multiprocessors;
  d["total_memory"] = p.total_memory;
  d["mps"] = p.mps < 0 ? py::object(py::none()) : py::object(py::bool_(p.mps == 1));
  return d;
}

}  // namespace

void bind_device(py::module_& m) {
  bind_device_arrays(m);
  m.def(
      "_set_gpu_library_dirs",
      [](const std::string& which, const std::vector<std::string>& paths) {
        ringcc::device::set_library_dirs(library_of(which), paths);
      },
      "Candidate library paths the package found (wheels, torch) for 'cuda', 'nccl' or 'nvrtc'.");
  m.def("_gpu_library_candidates",
        [](const std::string& which) { return ringcc::device::library_candidates(library_of(which)); });
  m.def(
      "_gpu_library_info",
      [](const std::string& which) {
        const GpuLibrary lib = library_of(which);
        ringcc::device::GpuLibraryInfo info;
        {
          GilRelease release;
          info = ringcc::device::library_info(lib);
        }
        return info_dict(info, lib);
      },
      "Searches once for 'cuda', 'nccl' or 'nvrtc' and says what was found.");
  m.def(
      "_probe_gpu_library",
      [](const std::string& which, const std::vector<std::string>& candidates) {
        const GpuLibrary lib = library_of(which);
        ringcc::device::GpuLibraryInfo info;
        {
          GilRelease release;
          info = ringcc::device::probe_library(lib, candidates);
        }
        return info_dict(info, lib);
      },
      "Tries these candidates only, without changing the library ringcc uses.");
  m.def(
      "_cuda_info",
      [] {
        py::dict d = info_dict(ringcc::device::library_info(GpuLibrary::kCuda), GpuLibrary::kCuda);
        py::list devices;
        const ringcc::device::CudaDriverState state = ringcc::device::cuda_driver_state();
        d["initialized"] = state.initialized;
        if (d["found"].cast<bool>() && !state.initialized) d["error"] = state.error;
        if (state.initialized) {
          std::vector<ringcc::device::DeviceProperties> props;
          {
            GilRelease release;
            props = ringcc::device::list_devices();
          }
          for (const auto& p : props) devices.append(device_dict(p));
        }
        d["devices"] = devices;
        return d;
      },
      "The CUDA driver ringcc found, its version and its devices.");
  // The device backend the registry chooses (core/backends/registry.h) for
  // a list of ranks' reports: {"host", "uuid", "nccl", "nvrtc", "forced"} each.
  m.def("_choose_gpu_backend", [](const py::list& ranks) {
    ringcc::BackendJob job;
    for (auto item : ranks) {
      py::dict d = item.cast<py::dict>();
      ringcc::device::GpuRankInfo i;
      i.host = d["host"].cast<std::string>();
      i.uuid = d["uuid"].cast<std::string>();
      i.nccl = d["nccl"].cast<bool>();
      i.nvrtc = d["nvrtc"].cast<bool>();
      i.forced = d.contains("forced") ? d["forced"].cast<std::string>() : "";
      job.gpus.push_back(i);
    }
    job.size = static_cast<int>(job.gpus.size());
    const ringcc::BackendChoice c = ringcc::choose_device_backend(job);
    return py::make_tuple(c.entry->name, c.reason);
  });
  m.def("_kernel_entry_points", &ringcc::device::kernel_entry_points);
  m.def("_kernel_source", [] { return ringcc::device::kernel_source(); });
  m.def("_kernel_cache_dir", &ringcc::device::kernel_cache_dir);
  // For the tests of the kernels (NVRTC works without a GPU): compile with
  // the NVRTC at `path` for each of `archs` (empty: every architecture it
  // supports); returns {arch: PTX text}.
  m.def(
      "_compile_kernels_with",
      [](const std::string& path, std::vector<int> archs, bool cubin) {
        py::dict out;
        std::vector<std::pair<int, std::string>> images;
        {
          GilRelease release;
          const ringcc::nvrtc::NvrtcApi api = ringcc::device::open_nvrtc(path);
          if (archs.empty()) archs = ringcc::device::nvrtc_supported_archs(api);
          for (int arch : archs) {
            images.emplace_back(arch, ringcc::device::compile_kernels(api, arch, cubin).bytes);
          }
        }
        for (auto& [arch, bytes] : images) out[py::int_(arch)] = py::bytes(bytes);
        return out;
      },
      py::arg("path"), py::arg("archs") = std::vector<int>{}, py::arg("cubin") = false);
}

}  // namespace ringcc_py
