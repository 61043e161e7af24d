// XLA FFI handlers for ringcc.jax: each JAX collective lowers to a custom
// call whose handler, run by XLA on one of its threads, hands the device
// buffers (host memory on the CPU platform) straight to the core. No Python,
// no GIL, no copy through NumPy. On the CUDA platform the handlers take the
// stream XLA hands them and enqueue the collective there (the core's GPU
// backends): it runs in XLA's stream order, without a host synchronisation.
//
// Every handler takes and returns an XLA token besides its data: ringcc.jax
// threads that token through every ringcc collective of a computation (and,
// through JAX's ordered effects, from one computation to the next), so XLA
// runs them one after another, in program order, on every rank.
//
// Built only when CMake found the XLA FFI headers (jaxlib's include dir,
// jax.ffi.include_dir()): RINGCC_WITH_JAX_FFI. Without them bind_jax_ffi()
// registers a jax_ffi_targets() that returns an empty dict.
#include <pybind11/pybind11.h>

#ifdef RINGCC_WITH_JAX_FFI

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "bindings/errors.h"
#include "bindings/global_communicator.h"
#include "core/base/error.h"
#include "core/collective/collective_args.h"
#include "core/communicator.h"
#include "core/device/cuda_device.h"
#include "core/device/gpu_libraries.h"
#include "xla/ffi/api/c_api.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace {

ffi::ErrorCode error_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUnsupportedType:
    case ErrorKind::kMismatch:
      return ffi::ErrorCode::kInvalidArgument;
    case ErrorKind::kPeerFailure:
      return ffi::ErrorCode::kAborted;
    case ErrorKind::kTimeout:
      return ffi::ErrorCode::kDeadlineExceeded;
    case ErrorKind::kNotInitialized:
      return ffi::ErrorCode::kFailedPrecondition;
    case ErrorKind::kInternal:
      return ffi::ErrorCode::kInternal;
    case ErrorKind::kInterrupted:
      return ffi::ErrorCode::kCancelled;
  }
  return ffi::ErrorCode::kInternal;
}

ffi::Error to_ffi_error(const ringcc::Error& e) {
  // Named in the message: XLA reports every handler error as its own
  // exception type, and ringcc.jax raises the class the message names.
  return ffi::Error(error_code(e.kind()), std::string(ringcc_py::python_class_name(e.kind())) + ": " + e.what());
}

// The core's dtype for an XLA element type; false when the core has none.
bool core_dtype(ffi::DataType t, ringcc::DataType* out) {
  switch (t) {
    case ffi::DataType::F16:
      *out = ringcc::DataType::kFloat16;
      return true;
    case ffi::DataType::BF16:
      *out = ringcc::DataType::kBFloat16;
      return true;
    case ffi::DataType::F32:
      *out = ringcc::DataType::kFloat32;
      return true;
    case ffi::DataType::F64:
      *out = ringcc::DataType::kFloat64;
      return true;
    case ffi::DataType::S8:
      *out = ringcc::DataType::kInt8;
      return true;
    case ffi::DataType::U8:
      *out = ringcc::DataType::kUInt8;
      return true;
    case ffi::DataType::S32:
      *out = ringcc::DataType::kInt32;
      return true;
    case ffi::DataType::S64:
      *out = ringcc::DataType::kInt64;
      return true;
    default:
      return false;
  }
}

// Elements per row along the first dimension (1 for a scalar).
int64_t row_elems(const ffi::AnyBuffer& b) {
  auto dims = b.dimensions();
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

// Runs args on the communicator of ringcc.init(), on this (XLA) thread; the
// communicator's ticket keeps it in issue order with any other caller.
ffi::Error run(CollectiveArgs& args) {
  try {
    ringcc_py::global_communicator()->run(args);
  } catch (const ringcc::Error& e) {
    return to_ffi_error(e);
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("ringcc: ") + e.what());
  } catch (...) {
    return ffi::Error::Internal("ringcc: unknown error in a collective");
  }
  return ffi::Error::Success();
}

// A collective this rank cannot start (checked here as a last resort; the
// Python side checks the same at trace time): take part anyway with the
// reason, so that the peers fail at once instead of waiting for us.
ffi::Error fail_locally(const CollectiveArgs& a, const std::string& why) {
  CollectiveArgs failed = ringcc::failed_call(a.kind, why);
  ffi::Error peers = run(failed);
  (void)peers;
  return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                    std::string("ringcc.InvalidArgumentError: ") + ringcc::naming_tensor(why, a, 0));
}

// Fills the input side of args from x; on failure returns the reason.
std::string fill_input(CollectiveArgs& a, const ffi::AnyBuffer& x) {
  if (!core_dtype(x.element_type(), &a.dtype)) {
    return "unsupported element type (XLA dtype " + std::to_string(static_cast<int>(x.element_type())) +
           "); use float16, bfloat16, float32, float64, int8, uint8, int32 or int64";
  }
  a.in = x.untyped_data();
  a.count = static_cast<int64_t>(x.element_count());
  a.row_elems = row_elems(x);
  auto dims = x.dimensions();  // XLA's, alive while the handler runs
  a.shape = dims.begin();
  a.ndim = static_cast<int32_t>(dims.size());
  return "";
}

void fill_output(CollectiveArgs& a, ffi::Result<ffi::AnyBuffer>& y) {
  a.out = y->untyped_data();
  a.out_count = static_cast<int64_t>(y->element_count());
}

// Where a CUDA handler's buffers live: XLA's stream, and the CUDA device of
// the buffer (its pointer's, else the context XLA made current).
struct Place {
  bool cuda = false;
  void* stream = nullptr;
};

constexpr Place kHost{};

std::string set_place(CollectiveArgs& a, const Place& place, const void* any_buffer) {
  if (!place.cuda) return "";
  try {
    const ringcc::cuda::DriverApi& api = ringcc::device::cuda_driver("a JAX array on a CUDA device");
    int ordinal = -1;
    if (!any_buffer || api.cuPointerGetAttribute(&ordinal, ringcc::cuda::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                 reinterpret_cast<ringcc::cuda::CUdeviceptr>(any_buffer)) !=
                           ringcc::cuda::CUDA_SUCCESS) {
      ringcc::cuda::CUdevice device = -1;
      if (api.cuCtxGetDevice(&device) != ringcc::cuda::CUDA_SUCCESS) {
        return "cannot tell the CUDA device of the buffers (no pointer attribute, no current context)";
      }
      ordinal = device;
    }
    a.memory = ringcc::MemoryKind::kCuda;
    a.device = ordinal;
    a.stream = place.stream;
  } catch (const ringcc::Error& e) {
    return e.what();
  }
  return "";
}

ffi::Error check_result(CollectiveArgs& a, const char* what) {
  if (a.result_count != a.out_count) {
    return ffi::Error::Internal(std::string("ringcc: ") + what + " produced " + std::to_string(a.result_count) +
                                " elements for an output of " + std::to_string(a.out_count));
  }
  return ffi::Error::Success();
}

ffi::Error Allreduce(const Place& place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t op, double prescale,
                     double postscale, std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllreduce;
  a.label = label;
  std::string why = fill_input(a, x);
  if (why.empty()) why = set_place(a, place, x.untyped_data());
  if (!why.empty()) return fail_locally(a, why);
  a.op = static_cast<ringcc::ReduceOp>(op);
  a.prescale = prescale;
  a.postscale = postscale;
  fill_output(a, y);  // equal to a.in when XLA aliased the two (donation)
  return run(a);
}

ffi::Error Broadcast(const Place& place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t root,
                     std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kBroadcast;
  a.label = label;
  std::string why = fill_input(a, x);
  if (why.empty()) why = set_place(a, place, x.untyped_data());
  if (!why.empty()) return fail_locally(a, why);
  a.root = static_cast<int>(root);
  fill_output(a, y);
  return run(a);
}

ffi::Error Allgather(const Place& place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllgather;
  a.label = label;
  std::string why = fill_input(a, x);
  if (why.empty()) why = set_place(a, place, y->untyped_data());
  if (!why.empty()) return fail_locally(a, why);
  fill_output(a, y);  // the core checks that every rank's rows add up to it
  ffi::Error e = run(a);
  return e.failure() ? e : check_result(a, "allgather");
}

ffi::Error ReduceScatter(const Place& place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t op,
                         double prescale, double postscale, std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kReduceScatter;
  a.label = label;
  std::string why = fill_input(a, x);
  if (why.empty()) why = set_place(a, place, x.untyped_data());
  if (!why.empty()) return fail_locally(a, why);
  a.op = static_cast<ringcc::ReduceOp>(op);
  a.prescale = prescale;
  a.postscale = postscale;
  fill_output(a, y);  // this rank's block: the core checks its size
  return run(a);
}

ffi::Error Alltoall(const Place& place, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, int64_t nranks,
                    std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kAlltoall;
  a.label = label;
  std::string why = fill_input(a, x);
  if (why.empty()) why = set_place(a, place, x.untyped_data());
  if (!why.empty()) return fail_locally(a, why);
  const int64_t rows = a.count / a.row_elems;
  if (nranks < 1 || rows % nranks != 0) {
    return fail_locally(a, "the first dimension (" + std::to_string(rows) + ") does not divide evenly over " +
                               std::to_string(nranks) + " ranks");
  }
  // Equal splits: rows / n rows to each rank (the core checks n == size).
  a.send_counts.assign(static_cast<size_t>(nranks), rows / nranks * a.row_elems);
  fill_output(a, y);
  ffi::Error e = run(a);
  return e.failure() ? e : check_result(a, "alltoall");
}

// The handlers of each platform: the CPU's take host buffers; CUDA's take
// the stream XLA runs them on.
ffi::Error AllreduceImpl(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                         int64_t op, double prescale, double postscale, std::string_view label) {
  return Allreduce(kHost, x, y, op, prescale, postscale, label);
}
ffi::Error AllreduceCudaImpl(void* stream, ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y,
                             ffi::Result<ffi::Token>, int64_t op, double prescale, double postscale,
                             std::string_view label) {
  return Allreduce(Place{true, stream}, x, y, op, prescale, postscale, label);
}
ffi::Error BroadcastImpl(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                         int64_t root, std::string_view label) {
  return Broadcast(kHost, x, y, root, label);
}
ffi::Error BroadcastCudaImpl(void* stream, ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y,
                             ffi::Result<ffi::Token>, int64_t root, std::string_view label) {
  return Broadcast(Place{true, stream}, x, y, root, label);
}
ffi::Error AllgatherImpl(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                         std::string_view label) {
  return Allgather(kHost, x, y, label);
}
ffi::Error AllgatherCudaImpl(void* stream, ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y,
                             ffi::Result<ffi::Token>, std::string_view label) {
  return Allgather(Place{true, stream}, x, y, label);
}
ffi::Error ReduceScatterImpl(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                             int64_t op, double prescale, double postscale, std::string_view label) {
  return ReduceScatter(kHost, x, y, op, prescale, postscale, label);
}
ffi::Error ReduceScatterCudaImpl(void* stream, ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y,
                                 ffi::Result<ffi::Token>, int64_t op, double prescale, double postscale,
                                 std::string_view label) {
  return ReduceScatter(Place{true, stream}, x, y, op, prescale, postscale, label);
}
ffi::Error AlltoallImpl(ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::Token>,
                        int64_t nranks, std::string_view label) {
  return Alltoall(kHost, x, y, nranks, label);
}
ffi::Error AlltoallCudaImpl(void* stream, ffi::AnyBuffer x, ffi::Token, ffi::Result<ffi::AnyBuffer> y,
                            ffi::Result<ffi::Token>, int64_t nranks, std::string_view label) {
  return Alltoall(Place{true, stream}, x, y, nranks, label);
}

ffi::Error BarrierImpl(ffi::Token, ffi::Result<ffi::Token>, std::string_view label) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kBarrier;
  a.label = label;
  return run(a);
}

// A collective whose arguments ringcc.jax found wrong on this rank while
// tracing: it takes the collective's place in program order, takes part in
// the peers' collective as a failed participant (they fail with
// MismatchError naming this rank and `reason`), and fails here with
// `error_class: ` and the reason, naming the collective as `label` does
// (`error_class` may be empty). Its result is never written.
ffi::Error FailImpl(ffi::Token, ffi::Result<ffi::AnyBuffer>, ffi::Result<ffi::Token>, int64_t kind,
                    std::string_view error_class, std::string_view reason, std::string_view label) {
  CollectiveArgs failed = ringcc::failed_call(static_cast<CollectiveKind>(kind), std::string(reason));
  ffi::Error peers = run(failed);
  (void)peers;  // this rank's own error is the one it found
  std::string text(reason);
  if (!label.empty()) {
    text = std::string(ringcc::collective_name(static_cast<CollectiveKind>(kind))) + " (" + std::string(label) +
           "): " + text;
  }
  return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                    error_class.empty() ? text : std::string(error_class) + ": " + text);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER(kRingccAllreduce, AllreduceImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("op")
                           .Attr<double>("prescale")
                           .Attr<double>("postscale")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccBroadcast, BroadcastImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("root")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccAllgather, AllgatherImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccReduceScatter, ReduceScatterImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("op")
                           .Attr<double>("prescale")
                           .Attr<double>("postscale")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccAlltoall, AlltoallImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("nranks")
                           .Attr<std::string_view>("label"));

// The CUDA platform's: the same, after XLA's stream.
XLA_FFI_DEFINE_HANDLER(kRingccAllreduceCuda, AllreduceCudaImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("op")
                           .Attr<double>("prescale")
                           .Attr<double>("postscale")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccBroadcastCuda, BroadcastCudaImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("root")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccAllgatherCuda, AllgatherCudaImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccReduceScatterCuda, ReduceScatterCudaImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("op")
                           .Attr<double>("prescale")
                           .Attr<double>("postscale")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccAlltoallCuda, AlltoallCudaImpl,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<void*>>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("nranks")
                           .Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccBarrier, BarrierImpl,
                       ffi::Ffi::Bind().Arg<ffi::Token>().Ret<ffi::Token>().Attr<std::string_view>("label"));

XLA_FFI_DEFINE_HANDLER(kRingccFail, FailImpl,
                       ffi::Ffi::Bind()
                           .Arg<ffi::Token>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::Token>()
                           .Attr<int64_t>("kind")
                           .Attr<std::string_view>("error_class")
                           .Attr<std::string_view>("reason")
                           .Attr<std::string_view>("label"));

namespace py = pybind11;

void bind_jax_ffi(py::module_& m) {
  m.def(
      "jax_ffi_targets",
      [] {
        py::dict d;
        auto add = [&d](const char* name, XLA_FFI_Handler* fn) { d[name] = py::capsule(reinterpret_cast<void*>(fn)); };
        add("ringcc_allreduce", kRingccAllreduce);
        add("ringcc_broadcast", kRingccBroadcast);
        add("ringcc_allgather", kRingccAllgather);
        add("ringcc_reduce_scatter", kRingccReduceScatter);
        add("ringcc_alltoall", kRingccAlltoall);
        add("ringcc_barrier", kRingccBarrier);
        add("ringcc_fail", kRingccFail);
        return d;
      },
      "XLA FFI handlers of ringcc.jax's collectives (CPU platform): name -> PyCapsule.");
  m.def(
      "jax_ffi_cuda_targets",
      [] {
        py::dict d;
        auto add = [&d](const char* name, XLA_FFI_Handler* fn) { d[name] = py::capsule(reinterpret_cast<void*>(fn)); };
        add("ringcc_allreduce", kRingccAllreduceCuda);
        add("ringcc_broadcast", kRingccBroadcastCuda);
        add("ringcc_allgather", kRingccAllgatherCuda);
        add("ringcc_reduce_scatter", kRingccReduceScatterCuda);
        add("ringcc_alltoall", kRingccAlltoallCuda);
        // A barrier and a failed call move no device data: the same handlers.
        add("ringcc_barrier", kRingccBarrier);
        add("ringcc_fail", kRingccFail);
        return d;
      },
      "XLA FFI handlers of ringcc.jax's collectives for the CUDA platform (on XLA's stream):\n"
      "name -> PyCapsule.");
  m.def(
      "jax_ffi_api_version", [] { return py::make_tuple(XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR); },
      "The XLA FFI API version (major, minor) of the headers the handlers were built with.");
}

#else  // !RINGCC_WITH_JAX_FFI

namespace py = pybind11;

void bind_jax_ffi(py::module_& m) {
  m.def(
      "jax_ffi_targets", [] { return py::dict(); },
      "Empty: this build of ringcc has no XLA FFI handlers (built without jaxlib's headers).");
  m.def(
      "jax_ffi_cuda_targets", [] { return py::dict(); },
      "Empty: this build of ringcc has no XLA FFI handlers (built without jaxlib's headers).");
  m.def("jax_ffi_api_version", [] { return py::none(); }, "None: this build of ringcc has no XLA FFI handlers.");
}

#endif  // RINGCC_WITH_JAX_FFI
