#include "core/device/cuda_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/base/error.h"
#include "core/device/gpu_libraries.h"
#include "core/device/kernel_cache.h"

namespace ringcc {
namespace device {

namespace {

using namespace ringcc::cuda;

DeviceProperties query(const DriverApi& api, int ordinal) {
  DeviceProperties p;
  p.ordinal = ordinal;
  CUdevice dev = 0;
  cuda_check(api, api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  char name[256] = {};
  if (api.cuDeviceGetName(name, sizeof(name) - 1, dev) == CUDA_SUCCESS) p.name = name;
  CUuuid uuid{};
  if (api.cuDeviceGetUuid_v2(&uuid, dev) == CUDA_SUCCESS) p.uuid = uuid_text(uuid);
  char bus[64] = {};
  if (api.cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) == CUDA_SUCCESS) p.pci_bus_id = bus;
  api.cuDeviceGetAttribute(&p.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  api.cuDeviceGetAttribute(&p.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  api.cuDeviceGetAttribute(&p.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  api.cuDeviceTotalMem_v2(&p.total_memory, dev);
  int mps = 0;
  if (api.cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) == CUDA_SUCCESS) p.mps = mps != 0;
  return p;
}

}  // namespace

std::string uuid_text(const CUuuid& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char out[64];
  std::snprintf(out, sizeof(out), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

std::vector<DeviceProperties> list_devices() {
  const DriverApi& api = cuda_driver("listing CUDA devices");
  int n = 0;
  cuda_check(api, api.cuDeviceGetCount(&n), "cuDeviceGetCount");
  std::vector<DeviceProperties> out;
  for (int i = 0; i < n; ++i) out.push_back(query(api, i));
  return out;
}

CudaDevice& CudaDevice::get(int ordinal) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<CudaDevice>> devices;
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices.find(ordinal);
  if (it != devices.end()) return *it->second;
  std::unique_ptr<CudaDevice> d(new CudaDevice(ordinal));
  CudaDevice& ref = *d;
  devices.emplace(ordinal, std::move(d));
  return ref;
}

CudaDevice::CudaDevice(int ordinal) : api_(cuda_driver("a CUDA tensor")) {
  int n = 0;
  cuda_check(api_, api_.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= n) {
    raise(ErrorKind::kInvalidArgument, "CUDA device ", ordinal, " does not exist (the driver sees ", n, " device",
          n == 1 ? "" : "s", ")");
  }
  props_ = query(api_, ordinal);
  CUdevice dev = 0;
  cuda_check(api_, api_.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  cuda_check(api_, api_.cuDevicePrimaryCtxRetain(&context_, dev), "cuDevicePrimaryCtxRetain");
}

CudaDevice::Scope::Scope(const CudaDevice& device) : api_(device.api_) {
  CUcontext current = nullptr;
  api_.cuCtxGetCurrent(&current);
  if (current != device.context_) {
    device.check(api_.cuCtxSetCurrent(device.context_), "cuCtxSetCurrent");
    previous_ = current;
    switched_ = true;
  }
}

CudaDevice::Scope::~Scope() {
  if (switched_) api_.cuCtxSetCurrent(previous_);
}

void CudaDevice::check(CUresult r, const char* what) const {
  if (r != CUDA_SUCCESS) {
    raise(ErrorKind::kInternal, what, " on CUDA device ", props_.ordinal, ": ", cuda_error_text(api_, r));
  }
}

CUstream CudaDevice::side_stream() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!side_) {
    Scope scope(*this);
    check(api_.cuStreamCreate(&side_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (side stream)");
  }
  return side_;
}

void CudaDevice::order_after(CUstream waiter, CUstream producer) {
  if (waiter == producer) return;
  Scope scope(*this);
  CUevent event = nullptr;
  check(api_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  // The event may be destroyed once waited on: the wait keeps what it needs.
  CUresult r = api_.cuEventRecord(event, producer);
  if (r == CUDA_SUCCESS) r = api_.cuStreamWaitEvent(waiter, event, 0);
  api_.cuEventDestroy_v2(event);
  check(r, "ordering one stream after another (cuEventRecord, cuStreamWaitEvent)");
}

void CudaDevice::load_kernels() {
  std::lock_guard<std::mutex> lock(mu_);
  if (module_) return;
  const int arch = props_.cc_major * 10 + props_.cc_minor;
  const KernelImage image = kernel_image_for(arch);
  Scope scope(*this);
  CUmodule module = nullptr;
  const CUresult r = api_.cuModuleLoadData(&module, image.bytes.c_str());
  if (r != CUDA_SUCCESS) {
    raise(ErrorKind::kInternal, "loading ringcc's device kernels (", image.cubin ? "CUBIN for sm_" : "PTX for compute_",
          image.arch, ", ", image.origin, ") into CUDA device ", props_.ordinal, " (sm_", arch,
          "): ", cuda_error_text(api_, r),
          r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_INVALID_PTX
              ? "; the NVRTC in use is newer than the driver: set RINGCC_NVRTC_LIB to the NVRTC of "
                "the driver's CUDA version"
              : "");
  }
  module_ = module;
  origin_ = std::string(image.cubin ? "CUBIN for sm_" : "PTX for compute_") + std::to_string(image.arch) + ", " +
            image.origin;
}

std::string CudaDevice::kernels_origin() {
  load_kernels();
  std::lock_guard<std::mutex> lock(mu_);
  return origin_;
}

CUfunction CudaDevice::function(const std::string& name) {
  load_kernels();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = functions_.find(name);
  if (it != functions_.end()) return it->second;
  CUfunction f = nullptr;
  check(api_.cuModuleGetFunction(&f, module_, name.c_str()), ("cuModuleGetFunction " + name).c_str());
  functions_[name] = f;
  return f;
}

unsigned int CudaDevice::blocks_for(int64_t count, size_t elem_size) const {
  // Threads each take 16 bytes per step; a few waves of blocks per SM keep
  // the memory system busy, more only add scheduling.
  constexpr int64_t kThreads = 512;
  const int64_t packs = (count * static_cast<int64_t>(elem_size) + 15) / 16;
  const int64_t wanted = (packs + kThreads - 1) / kThreads;
  const int64_t cap = std::max(1, props_.multiprocessors) * 4;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min(wanted, cap)));
}

void CudaDevice::scale(CUstream stream, void* dst, const void* src, int64_t count, DataType dtype, double factor) {
  if (count <= 0) return;
  CUfunction f = function(scale_kernel_name(dtype));
  long long n = count;
  void* params[] = {&dst, const_cast<void**>(&src), &n, &factor};
  Scope scope(*this);
  check(api_.cuLaunchKernel(f, blocks_for(count, dtype_size(dtype)), 1, 1, 512, 1, 1, 0, stream, params, nullptr),
        "cuLaunchKernel (scale)");
}

bool CudaDevice::launch_timestamp(CUstream stream, unsigned long long* slot) {
  CUfunction f = nullptr;
  try {
    f = function("ringcc_timestamp");
  } catch (const Error&) {
    return false;
  }
  void* params[] = {&slot};
  Scope scope(*this);
  return api_.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS;
}

void CudaDevice::reduce(CUstream stream, void* dst, const void* const* srcs, int nsrc, int64_t count, DataType dtype,
                        ReduceOp op, double postscale) {
  if (count <= 0) return;
  if (nsrc < 1 || nsrc > kMaxSources) {
    raise(ErrorKind::kInternal, "a device reduction takes 1 to ", kMaxSources, " sources, not ", nsrc);
  }
  CUfunction f = function(reduce_kernel_name(dtype, op));
  struct {
    const void* ptr[kMaxSources];
  } sources{};
  for (int i = 0; i < nsrc; ++i) sources.ptr[i] = srcs[i];
  long long n = count;
  void* params[] = {&dst, &sources, &nsrc, &n, &postscale};
  Scope scope(*this);
  check(api_.cuLaunchKernel(f, blocks_for(count, dtype_size(dtype)), 1, 1, 512, 1, 1, 0, stream, params, nullptr),
        "cuLaunchKernel (reduce)");
}

}  // namespace device
}  // namespace ringcc
