// One CUDA device as ringcc's GPU backends use it: its primary context (the
// one CUDA's runtime, and so torch, CuPy and JAX, use), its properties, and
// ringcc's kernels loaded into it. Shared by every backend of the process;
// nothing here is created until a GPU collective or query needs it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"
#include "core/device/cuda_api.h"

namespace ringcc {
namespace device {

struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  std::string uuid;        // "GPU-1b2c...", as nvidia-smi -L prints it
  std::string pci_bus_id;  // "0000:3B:00.0"
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  size_t total_memory = 0;
  // Whether processes' contexts on this device are shared through NVIDIA's
  // Multi-Process Service: 1 yes, 0 no, -1 the driver does not say (a
  // driver older than the attribute).
  int mps = -1;
};

// Every device the driver sees (the driver must have initialised).
std::vector<DeviceProperties> list_devices();

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string uuid_text(const cuda::CUuuid& uuid);

class CudaDevice {
 public:
  // The device with this ordinal; its primary context is retained on first
  // use and kept for the life of the process. Raises Error(kInvalidArgument)
  // when the driver is missing or the ordinal does not exist.
  static CudaDevice& get(int ordinal);

  const cuda::DriverApi& api() const { return api_; }
  const DeviceProperties& properties() const { return props_; }
  int ordinal() const { return props_.ordinal; }
  cuda::CUcontext context() const { return context_; }

  // Makes the device's primary context current on this thread for the
  // scope (restoring the previous one after).
  class Scope {
   public:
    explicit Scope(const CudaDevice& device);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const cuda::DriverApi& api_;
    cuda::CUcontext previous_ = nullptr;
    bool switched_ = false;
  };

  // Raises Error(kInternal) "<what>: <CUDA error>" unless r is success.
  void check(cuda::CUresult r, const char* what) const;

  // Enqueues dst[i] = src[i] * factor on `stream` (dst may equal src).
  void scale(cuda::CUstream stream, void* dst, const void* src, int64_t count, DataType dtype, double factor);
  // Enqueues dst = srcs[0] op ... op srcs[nsrc-1], then * postscale, on
  // `stream`; nsrc <= kMaxSources, dst may equal srcs[0].
  void reduce(cuda::CUstream stream, void* dst, const void* const* srcs, int nsrc, int64_t count, DataType dtype,
              ReduceOp op, double postscale);
  static constexpr int kMaxSources = 16;  // RINGCC_MAX_SOURCES of the kernels

  // A stream of this process on the device, apart from any caller's, for
  // collectives that run when the background engine gets to them (named
  // collectives): ordered after the caller's stream when they are
  // enqueued, waited for by the caller's stream when they are waited for.
  // Created on first use (non-blocking), kept for the life of the process.
  cuda::CUstream side_stream();
  // Makes `waiter` wait for the work queued on `producer` so far (an event
  // recorded there); nothing when they are the same stream.
  void order_after(cuda::CUstream waiter, cuda::CUstream producer);

  // Enqueues ringcc_timestamp(slot) on `stream` (RINGCC_GPU_TRACE: `slot`
  // is device-visible memory); false when the kernels cannot be loaded.
  bool launch_timestamp(cuda::CUstream stream, unsigned long long* slot);

  // Loads the kernels now (they load on first use otherwise).
  void load_kernels();
  // Where the loaded kernels came from ("CUBIN for sm_90, compiled by NVRTC 13.0").
  std::string kernels_origin();

 private:
  explicit CudaDevice(int ordinal);
  cuda::CUfunction function(const std::string& name);
  unsigned int blocks_for(int64_t count, size_t elem_size) const;

  const cuda::DriverApi& api_;
  DeviceProperties props_;
  cuda::CUcontext context_ = nullptr;
  std::mutex mu_;
  cuda::CUmodule module_ = nullptr;
  std::string origin_;
  std::map<std::string, cuda::CUfunction> functions_;
  cuda::CUstream side_ = nullptr;
};

}  // namespace device
}  // namespace ringcc
