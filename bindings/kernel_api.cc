// The table of bindings/kernel_api.h: named collectives for the kernels of
// frameworks that load ringcc as a library of their own (TensorFlow's op
// library, plugins/tensorflow/). Their kernels run on the framework's
// threads without the GIL and must not block: a call is handed to the
// engine and its completion is a callback (Work::when_done).
#include "bindings/kernel_api.h"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "bindings/errors.h"
#include "bindings/global_communicator.h"
#include "core/base/error.h"
#include "core/collective/collective_args.h"
#include "core/collective/dtype.h"
#include "core/engine/tensor_meta.h"

namespace py = pybind11;

using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

static_assert(RINGCC_LAYOUT_GROUP_FAILED == ringcc::TensorMeta::kGroupFailed,
              "the kernel API's failed-group layout is the engine's");

namespace {

// The error of the exception being handled: its kind and "ringcc.Class: what".
void describe_current(ErrorKind* kind, std::string* message) {
  try {
    throw;
  } catch (const ringcc::Error& e) {
    *kind = e.kind();
    *message = std::string(ringcc_py::python_class_name(e.kind())) + ": " + e.what();
  } catch (const std::exception& e) {
    *kind = ErrorKind::kInternal;
    *message = std::string("ringcc.InternalError: ") + e.what();
  } catch (...) {
    *kind = ErrorKind::kInternal;
    *message = "ringcc.InternalError: unknown C++ exception";
  }
}

void report(RingccKernelDone done, void* ctx, ErrorKind kind, const std::string& message) {
  done(ctx, static_cast<int32_t>(kind), message.c_str(), 0, nullptr, 0);
}

CollectiveArgs args_of(const RingccKernelCall& c) {
  if (!ringcc::dtype_valid(c.dtype)) {
    ringcc::raise(ErrorKind::kUnsupportedType, "dtype code ", c.dtype, " is not one ringcc moves");
  }
  if (c.kind < static_cast<int32_t>(CollectiveKind::kAllreduce) ||
      c.kind > static_cast<int32_t>(CollectiveKind::kAlltoall)) {
    ringcc::raise(ErrorKind::kInvalidArgument, "collective kind ", c.kind, " is not one a kernel can call");
  }
  CollectiveArgs a;
  a.kind = static_cast<CollectiveKind>(c.kind);
  a.dtype = static_cast<ringcc::DataType>(c.dtype);
  a.op = static_cast<ringcc::ReduceOp>(c.op);
  a.root = c.root;
  a.prescale = c.prescale;
  a.postscale = c.postscale;
  a.in = c.in;
  a.out = c.out;
  a.count = c.count;
  a.row_elems = c.row_elems;
  a.out_count = c.out_count;
  if (c.send_counts && c.n_send_counts > 0) a.send_counts.assign(c.send_counts, c.send_counts + c.n_send_counts);
  // The table is a C interface: a missing buffer is a refusal, not a crash.
  if (c.n_segments < 0) ringcc::raise(ErrorKind::kInvalidArgument, "a negative number of segments");
  if (c.n_segments > 0) {
    if (a.kind != CollectiveKind::kAllreduce || !c.segment_in || !c.segment_count || !c.out) {
      ringcc::raise(ErrorKind::kInvalidArgument, "only an allreduce with an output takes its input in segments");
    }
    const size_t es = ringcc::dtype_size(a.dtype);
    auto* out = static_cast<char*>(c.out);
    int64_t total = 0;
    a.segments.reserve(static_cast<size_t>(c.n_segments));
    for (int32_t i = 0; i < c.n_segments; ++i) {
      const int64_t n = c.segment_count[i];
      if (n < 0) ringcc::raise(ErrorKind::kInvalidArgument, "segment ", i, " has a negative element count");
      if (n > 0 && !c.segment_in[i]) ringcc::raise(ErrorKind::kInvalidArgument, "segment ", i, " has no input");
      a.segments.push_back({c.segment_in[i], out + static_cast<size_t>(total) * es, n});
      total += n;
    }
    if (total != c.count) {
      ringcc::raise(ErrorKind::kInvalidArgument, "the segments hold ", total, " elements, not the call's ", c.count);
    }
    a.in = nullptr;
  } else if (c.count > 0 && !c.in) {
    ringcc::raise(ErrorKind::kInvalidArgument, "a call of ", c.count, " elements without an input");
  }
  // (An output of no elements, a rank's empty block of a reduce-scatter,
  // may have no memory.)
  if (!c.out && !c.allocate && (c.out_count > 0 || (c.out_count < 0 && c.count > 0))) {
    ringcc::raise(ErrorKind::kInvalidArgument, "a call without an output (nor a way to allocate one)");
  }
  if (c.allocate) {
    auto* allocate = c.allocate;
    void* allocate_ctx = c.allocate_ctx;
    a.allocate = [allocate, allocate_ctx](int64_t elements) -> void* {
      void* out = allocate(allocate_ctx, elements);
      if (!out && elements > 0) {
        ringcc::raise(ErrorKind::kInternal, "the framework could not allocate the output (", elements, " elements)");
      }
      return out;
    };
  }
  return a;
}

void kernel_enqueue(const RingccKernelCall* call, RingccKernelDone done, void* done_ctx) {
  const std::string name = call->name ? call->name : "";
  try {
    if (name.empty()) ringcc::raise(ErrorKind::kInvalidArgument, "a kernel's collective needs a name");
    CollectiveArgs args = args_of(*call);
    std::shared_ptr<ringcc::Work> work;
    // The framework waits for the op (its executor or its eager caller):
    // the caller counts as blocked on the engine until the op completes.
    std::shared_ptr<ringcc::EngineWaiter> waiter;
    ringcc_py::with_engine([&](ringcc::Engine& engine) {
      work = engine.enqueue(name, std::move(args), call->shape, static_cast<size_t>(call->ndim), call->layout);
      if (call->nudge) engine.nudge(work);
      waiter = std::make_shared<ringcc::EngineWaiter>(engine.waiter());
    });
    ringcc::Work* raw = work.get();
    // The callback holds the Work until it ran (the engine reuses a Work
    // only once nobody else holds it).
    raw->when_done([work, waiter, done, done_ctx]() mutable {
      auto& a = work->list()[0];
      try {
        work->wait(0);
        done(done_ctx, -1, "", a.result_count, a.recv_counts.data(), static_cast<int32_t>(a.recv_counts.size()));
      } catch (...) {
        ErrorKind kind;
        std::string message;
        describe_current(&kind, &message);
        report(done, done_ctx, kind, message);
      }
      waiter.reset();
      work.reset();
    });
  } catch (...) {
    ErrorKind kind;
    std::string message;
    describe_current(&kind, &message);
    // This rank takes part as a failed participant, so its peers fail at once.
    if (!name.empty() && kind != ErrorKind::kNotInitialized) {
      try {
        const std::string why = message.substr(message.find(": ") + 2);
        ringcc_py::with_engine([&](ringcc::Engine& engine) {
          engine.enqueue(name, ringcc::failed_call(static_cast<CollectiveKind>(call->kind), why), nullptr, 0,
                         call->layout);
        });
      } catch (...) {
        // Nobody else can be told; this rank's own error is reported below.
      }
    }
    report(done, done_ctx, kind, message);
  }
}

void kernel_fail(const char* name, int32_t kind, const char* why, int64_t layout) {
  try {
    if (!name || !*name) return;
    ringcc_py::with_engine([&](ringcc::Engine& engine) {
      engine.enqueue(name, ringcc::failed_call(static_cast<CollectiveKind>(kind), why ? why : ""), nullptr, 0,
                     layout);
    });
  } catch (...) {
    // Not initialized: there are no peers to tell.
  }
}

int32_t kernel_rank() {
  try {
    return ringcc_py::global_communicator()->rank();
  } catch (...) {
    return -1;
  }
}

int32_t kernel_size() {
  try {
    return ringcc_py::global_communicator()->size();
  } catch (...) {
    return -1;
  }
}

const RingccKernelApi g_api = {
    RINGCC_KERNEL_API_VERSION, sizeof(RingccKernelApi), kernel_enqueue, kernel_fail, kernel_rank, kernel_size,
};

}  // namespace

void bind_kernel_api(py::module_& m) {
  m.def(
      "_kernel_api", [] { return reinterpret_cast<uintptr_t>(&g_api); },
      "The address of the C table (bindings/kernel_api.h) through which a framework's kernel library "
      "hands named collectives to this process's engine.");
}
