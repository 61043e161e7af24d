// ringcc's TensorFlow ops, libringcc_tensorflow.so: loaded with
// tf.load_op_library() by ringcc.tensorflow, built with no TensorFlow
// header or library. At load it finds TensorFlow's C API in the process
// (the libtensorflow_framework.so.2 that `import tensorflow` loaded; see
// tf_c_api.h) and registers its ops and their CPU kernels, so one build
// serves every TensorFlow in the tested range.
//
// Every kernel is asynchronous (TF_NewAsyncKernelBuilder): it hands its
// tensors to ringcc's background engine as named collectives through
// ringcc._core's kernel table (bindings/kernel_api.h) and returns at once,
// without holding one of TensorFlow's threads; the engine's completion
// callback finishes the op. Ranks may therefore run the ops of a graph in
// any order, and the engine fuses those that are ready together. The
// tensors' memory goes to the core as it is: inputs by address, outputs
// allocated by TensorFlow (an allreduce's input is forwarded as its
// output, and reduced in place, when TensorFlow allows).
//
// One reliance beyond the C API's declarations: TensorFlow's async kernel
// passes `done` as the address of its std::function<void()>, which lives
// only until compute_async_func returns (CAsyncOpKernel::ComputeAsync in
// tensorflow/c/kernels.cc). The kernel moves that function out to call it
// later: the same libstdc++ std::function ABI on both sides (TensorFlow's
// Linux wheels link libstdc++.so.6, and so do these kernels' headers).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "bindings/kernel_api.h"
#include "plugins/tensorflow/tf_c_api.h"

using namespace ringcc::tf;

namespace {

// Values of ringcc::CollectiveKind, DataType, ErrorKind (core/collective/
// op_header.h, dtype.h; core/base/error.h), which this library does not link.
enum Kind : int32_t { kAllreduce = 1, kAllgather = 2, kBroadcast = 3, kReduceScatter = 4, kAlltoall = 5 };
// This library's own, for registration: an allreduce of many tensors into one.
constexpr int32_t kPackedAllreduce = -1;
enum CoreType : int32_t { kF16 = 0, kBF16 = 1, kF32 = 2, kF64 = 3, kI8 = 4, kU8 = 5, kI32 = 6, kI64 = 7 };
enum ErrorKindValue : int32_t {
  kInvalidArgument = 0,
  kUnsupportedType = 1,
  kMismatch = 2,
  kPeerFailure = 3,
  kTimeout = 4,
  kNotInitialized = 5,
  kInternal = 6,
  kInterrupted = 7,
};

TfApi g_tf;
std::string g_load_error;                              // why nothing was registered
std::atomic<const RingccKernelApi*> g_core{nullptr};  // ringcc._core's table, set by ringcc_tf_bind()

int32_t core_type(TF_DataType t) {
  switch (t) {
    case TF_HALF:
      return kF16;
    case TF_BFLOAT16:
      return kBF16;
    case TF_FLOAT:
      return kF32;
    case TF_DOUBLE:
      return kF64;
    case TF_INT8:
      return kI8;
    case TF_UINT8:
      return kU8;
    case TF_INT32:
      return kI32;
    case TF_INT64:
      return kI64;
    default:
      return -1;
  }
}

// A dtype's name for messages (TensorFlow's spelling), its number when
// this library declares no name for it.
std::string dtype_name(TF_DataType t) {
  switch (t) {
    case TF_BOOL:
      return "bool";
    case TF_INT16:
      return "int16";
    case TF_UINT16:
      return "uint16";
    case TF_STRING:
      return "string";
    case TF_COMPLEX64:
      return "complex64";
    case TF_COMPLEX128:
      return "complex128";
    default:
      return "TensorFlow dtype " + std::to_string(static_cast<int>(t));
  }
}

// What the message about any other dtype says ringcc.tensorflow moves (those
// beyond the core's travel as a wider type: ringcc.tensorflow's _to_wire).
const char* const kNotMoved =
    ", which ringcc does not move (float16, bfloat16, float32, float64, int8, uint8, int16, uint16, int32, uint32, "
    "int64, uint64, bool)";

size_t type_size(int32_t core) {
  switch (core) {
    case kF16:
    case kBF16:
      return 2;
    case kF32:
    case kI32:
      return 4;
    case kF64:
    case kI64:
      return 8;
    default:
      return 1;
  }
}

TF_Code code_of(int32_t error_kind) {
  switch (error_kind) {
    case kInvalidArgument:
    case kMismatch:
      return TF_INVALID_ARGUMENT;
    case kUnsupportedType:
      return TF_UNIMPLEMENTED;
    // Not UNAVAILABLE: TensorFlow's executor turns that code from an op it
    // does not count as a communication op into INTERNAL (its network-error
    // handling is reserved for its own ops), so inside tf.function a dead
    // peer would reach the user as an InternalError. ABORTED goes through
    // unchanged, eagerly and in graphs.
    case kPeerFailure:
      return TF_ABORTED;
    case kTimeout:
      return TF_DEADLINE_EXCEEDED;
    case kNotInitialized:
      return TF_FAILED_PRECONDITION;
    case kInterrupted:
      return TF_CANCELLED;
    default:
      return TF_INTERNAL;
  }
}

// ---------------------------------------------------------------------------
// Finding TensorFlow's C API.

bool find_tensorflow() {
  // The library `import tensorflow` loaded (RTLD_NOLOAD: never a second
  // copy), else whatever the process has in its global scope.
  void* lib = dlopen("libtensorflow_framework.so.2", RTLD_NOW | RTLD_NOLOAD);
  void* scopes[2] = {lib, RTLD_DEFAULT};
  std::string missing;
#define RINGCC_TF_FIND(symbol, result, params)                                            \
  for (void* scope : scopes) {                                                            \
    if (scope == nullptr && scope != RTLD_DEFAULT) continue;                              \
    if (void* f = dlsym(scope, #symbol)) {                                                \
      g_tf.symbol = reinterpret_cast<result(*) params>(f);                                \
      break;                                                                              \
    }                                                                                     \
  }                                                                                       \
  if (!g_tf.symbol) missing += std::string(missing.empty() ? "" : ", ") + #symbol;
  RINGCC_TF_FUNCTIONS(RINGCC_TF_FIND)
#undef RINGCC_TF_FIND
  if (!missing.empty()) {
    g_load_error = "TensorFlow's C API lacks " + missing +
                   " (libtensorflow_framework.so.2 " + (lib ? "is loaded" : "is not loaded in this process") +
                   "): this TensorFlow is outside the range ringcc.tensorflow supports";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The kernels.

struct Kernel {
  int32_t kind = kAllreduce;
  int32_t op = 0;
  int32_t root = 0;
  double prescale = 1.0, postscale = 1.0;
  bool nudge = false;
  bool packed = false;       // RingccPackedAllreduce: one collective, one flat output
  int64_t layout = 0;        // see RingccKernelCall::layout
  std::string layout_text;  // a pack's shapes as this rank sees them, for its MismatchError
  std::string base;  // the engine's name of input 0 (grouped: base + "." + i)
  bool named = false;  // base came from the op's tensor_name, not its node's name
  std::string failure;  // this rank's arguments, refused while the op was built (see compute)
  std::vector<std::string> names;
};

std::string read_string_attr(TF_OpKernelConstruction* ctx, const char* attr, TF_Status* status) {
  int32_t list_size = 0, total = 0;
  g_tf.TF_OpKernelConstruction_GetAttrSize(ctx, attr, &list_size, &total, status);
  if (g_tf.TF_GetCode(status) != TF_OK || total <= 0) return "";
  std::string value(static_cast<size_t>(total), '\0');
  g_tf.TF_OpKernelConstruction_GetAttrString(ctx, attr, value.data(), value.size(), status);
  return value;
}

void* create_kernel(TF_OpKernelConstruction* ctx, int32_t kind) {
  auto* k = new Kernel;
  k->kind = kind;
  TF_Status* status = g_tf.TF_NewStatus();
  auto get_int = [&](const char* attr, int64_t fallback) {
    int64_t v = fallback;
    g_tf.TF_OpKernelConstruction_GetAttrInt64(ctx, attr, &v, status);
    if (g_tf.TF_GetCode(status) != TF_OK) v = fallback;
    g_tf.TF_SetStatus(status, TF_OK, "");
    return v;
  };
  auto get_float = [&](const char* attr) {
    float v = 1.0f;
    g_tf.TF_OpKernelConstruction_GetAttrFloat(ctx, attr, &v, status);
    if (g_tf.TF_GetCode(status) != TF_OK) v = 1.0f;
    g_tf.TF_SetStatus(status, TF_OK, "");
    return static_cast<double>(v);
  };
  k->op = static_cast<int32_t>(get_int("reduce_op", 0));
  k->root = static_cast<int32_t>(get_int("root_rank", 0));
  k->prescale = get_float("prescale_factor");
  k->postscale = get_float("postscale_factor");
  k->layout = get_int("layout", 0);
  k->layout_text = read_string_attr(ctx, "layout_text", status);
  g_tf.TF_SetStatus(status, TF_OK, "");
  TfBool nudge = 0;
  g_tf.TF_OpKernelConstruction_GetAttrBool(ctx, "nudge", &nudge, status);
  k->nudge = g_tf.TF_GetCode(status) == TF_OK && nudge != 0;
  g_tf.TF_SetStatus(status, TF_OK, "");
  k->base = read_string_attr(ctx, "tensor_name", status);
  k->named = !k->base.empty();
  g_tf.TF_SetStatus(status, TF_OK, "");
  k->failure = read_string_attr(ctx, "failure", status);
  g_tf.TF_SetStatus(status, TF_OK, "");
  if (k->base.empty()) {
    // Unnamed: the node's name, the same on every rank that built the same
    // graph (and the op's name when it runs eagerly, one at a time).
    const TF_StringView node = g_tf.TF_OpKernelConstruction_GetName(ctx);
    k->base = std::string(node.data, node.len);
  }
  // The first collective of a group takes the op's name as it is, the others
  // their position after it: a rank whose group holds one tensor where its
  // peers' hold more shares that first name with them, and so gets the
  // mismatch of the groups' lengths instead of a wait for the timeout.
  const int64_t n = get_int("N", 1);
  for (int64_t i = 0; i < n; ++i) k->names.push_back(i == 0 ? k->base : k->base + "." + std::to_string(i));
  g_tf.TF_DeleteStatus(status);
  return k;
}

void delete_kernel(void* k) { delete static_cast<Kernel*>(k); }

// The collectives of a grouped op that is not a pack carry the group's
// length as their layout (_group_layout in adapters/ringcc/tensorflow/_ops.py);
// a pack's layout ends in its index and its group's number of packs, 16 bits
// each (_layout there). When the ranks' groups differ, the engine's
// MismatchError on the collective they share first (the group's name: its
// first collective, or its first pack) lists each rank's layout; a rank
// whose group has fewer collectives (or packs) then takes part as a failed
// participant in the longer groups' collectives that it never enqueued
// (base.n and on), so that their ranks fail now rather than at the
// collectives' timeout. Packs are named as a group's collectives are (base,
// base.1, ...), so a rank that packed its group can fail the other
// collectives of a rank that did not.
constexpr int kPackBits = 16;
constexpr int64_t kPackMask = (int64_t{1} << kPackBits) - 1;

void report_missing(const Kernel& k, const std::string& message) {
  int64_t mine = static_cast<int64_t>(k.names.size());
  if (k.packed) {
    // Only the first pack of a group named by its op reports, for the group,
    // from the second collective on: this rank's later packs are ops that
    // TensorFlow does not run once this one failed (it orders stateful ops;
    // eager code raises), while a group that was not packed waits for all.
    if (!k.named || ((k.layout >> kPackBits) & kPackMask) != 0) return;
    mine = 1;
  } else if (mine < 1 || k.layout != mine) {
    return;
  }
  static const std::string kDigests = "grouped with it (digests ";
  const size_t at = message.find(kDigests);
  if (at == std::string::npos) return;
  const size_t end = message.find(')', at);
  constexpr int64_t kMostMissing = 1 << 16;  // a larger layout is no group's length
  int64_t longest = 0;
  for (size_t pos = message.find(": ", at + kDigests.size()); pos < end; pos = message.find(": ", pos)) {
    pos += 2;
    // A group that is not packed tells its length. A pack's layout is larger:
    // its group's other packs are ops of their own, which that rank does not
    // run once its first pack failed (TensorFlow orders stateful ops), so
    // failing their names here would leave failures for its next call.
    const int64_t value = static_cast<int64_t>(std::strtoll(message.c_str() + pos, nullptr, 10));
    if (value <= kMostMissing) longest = std::max(longest, value);
  }
  const RingccKernelApi* core = g_core.load();
  if (!core || longest <= mine || longest > mine + kMostMissing) return;
  const std::string why = message.substr(message.find(": ") + 2);
  for (int64_t i = mine; i < longest; ++i) {
    core->fail((k.base + "." + std::to_string(i)).c_str(), k.kind, why.c_str(), RINGCC_LAYOUT_GROUP_FAILED);
  }
}

// One run of a kernel: what its collectives share until the last completes.
struct Run {
  TF_OpKernelContext* ctx = nullptr;
  std::function<void()> done;
  std::atomic<int> remaining{0};
  std::mutex mu;
  int32_t error_kind = -1;
  std::string error;
  std::vector<TF_Tensor*> keep;  // inputs and outputs, released at the end
  // Per collective: shape (allocate callbacks), its output index.
  struct Slot {
    Run* run = nullptr;
    int output = 0;
    TF_DataType dtype = TF_FLOAT;
    std::vector<int64_t> dims;
    int64_t row_elems = 1;
  };
  std::vector<Slot> slots;
  std::vector<int64_t> send_counts;
  std::vector<const void*> segment_in;  // a packed allreduce's inputs
  std::vector<int64_t> segment_count;
  int kind = kAllreduce;
  const Kernel* kernel = nullptr;  // which outlives its runs

  void fail(int32_t kind_, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (error_kind >= 0) return;
      error_kind = kind_;
      error = message;
      // The engine compares a pack's layout as a digest: say what this rank packed.
      if (kind_ == kMismatch && kernel && !kernel->layout_text.empty()) {
        error += " (this rank: " + kernel->layout_text + ")";
      }
    }
    if (kind_ == kMismatch && kernel) report_missing(*kernel, message);
  }
  void finish() {
    if (error_kind >= 0) {
      TF_Status* status = g_tf.TF_NewStatus();
      g_tf.TF_SetStatus(status, code_of(error_kind), error.c_str());
      g_tf.TF_OpKernelContext_Failure(ctx, status);
      g_tf.TF_DeleteStatus(status);
    }
    // The handles go after `done`: the executor keeps the inputs until then
    // and owns the outputs, and a thousand handles (a gradient tape's pack)
    // cost 100-150 us that the step would otherwise wait for.
    std::vector<TF_Tensor*> handles = std::move(keep);
    std::function<void()> callback = std::move(done);
    delete this;
    callback();
    for (TF_Tensor* t : handles) g_tf.TF_DeleteTensor(t);
  }
  void one_done() {
    if (remaining.fetch_sub(1) == 1) finish();
  }
  void keep_tensor(TF_Tensor* t) {
    std::lock_guard<std::mutex> lock(mu);
    keep.push_back(t);
  }
};

void* allocate_rows(void* slot_ptr, int64_t elements) {
  auto* slot = static_cast<Run::Slot*>(slot_ptr);
  std::vector<int64_t> dims = slot->dims;
  if (dims.empty()) dims.push_back(0);
  dims[0] = slot->row_elems > 0 ? elements / slot->row_elems : 0;
  TF_Status* status = g_tf.TF_NewStatus();
  TF_Tensor* out = g_tf.TF_AllocateOutput(slot->run->ctx, slot->output, slot->dtype, dims.data(),
                                          static_cast<int>(dims.size()),
                                          static_cast<size_t>(elements) * type_size(core_type(slot->dtype)), status);
  void* data = nullptr;
  if (g_tf.TF_GetCode(status) == TF_OK && out) {
    slot->run->keep_tensor(out);
    data = g_tf.TF_TensorData(out);
    static char empty;
    if (!data && elements == 0) data = &empty;
  }
  g_tf.TF_DeleteStatus(status);
  return data;
}

void collective_done(void* slot_ptr, int32_t error_kind, const char* message, int64_t, const int64_t* recv,
                     int32_t n_recv) {
  auto* slot = static_cast<Run::Slot*>(slot_ptr);
  Run* run = slot->run;
  if (error_kind >= 0) {
    run->fail(error_kind, message ? message : "ringcc.RingccError");
  } else if (run->kind == kAlltoall) {
    // Output 1: the rows received from each rank.
    const int64_t rank_count = n_recv;
    TF_Status* status = g_tf.TF_NewStatus();
    TF_Tensor* splits = g_tf.TF_AllocateOutput(run->ctx, 1, TF_INT64, &rank_count, 1,
                                               static_cast<size_t>(rank_count) * sizeof(int64_t), status);
    if (g_tf.TF_GetCode(status) == TF_OK && splits) {
      auto* rows = static_cast<int64_t*>(g_tf.TF_TensorData(splits));
      for (int32_t r = 0; r < n_recv; ++r) rows[r] = slot->row_elems > 0 ? recv[r] / slot->row_elems : 0;
      g_tf.TF_DeleteTensor(splits);
    } else {
      run->fail(kInternal, std::string("ringcc.InternalError: could not allocate the received splits: ") +
                               g_tf.TF_Message(status));
    }
    g_tf.TF_DeleteStatus(status);
  }
  run->one_done();
}

// RingccPackedAllreduce: its inputs reduced as one collective into one flat
// output, read where they lie (no concatenation first: shared memory reads
// each input directly, other transports pack them as a fused batch).
void enqueue_packed(const Kernel& k, TF_OpKernelContext* ctx, Run* run, const RingccKernelApi* core) {
  Run::Slot& slot = run->slots[0];
  slot.run = run;
  slot.output = 0;
  auto failure = [&](int32_t kind, const std::string& message) {
    run->fail(kind, message);
    if (core) core->fail(k.base.c_str(), kAllreduce, message.substr(message.find(": ") + 2).c_str(), k.layout);
    run->one_done();
  };
  if (!core || core->size() < 1) {
    run->fail(kNotInitialized, "ringcc.NotInitializedError: ringcc is not initialized: call hvd.init() first");
    run->one_done();
    return;
  }
  const int n = g_tf.TF_NumInputs(ctx);
  run->segment_in.resize(static_cast<size_t>(n));
  run->segment_count.resize(static_cast<size_t>(n));
  run->keep.reserve(static_cast<size_t>(n) + 1);
  TF_Status* status = g_tf.TF_NewStatus();
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    TF_Tensor* in = nullptr;
    g_tf.TF_GetInput(ctx, i, &in, status);
    if (g_tf.TF_GetCode(status) != TF_OK || !in) {
      failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
      g_tf.TF_DeleteStatus(status);
      return;
    }
    run->keep.push_back(in);  // no callback runs yet: no lock needed
    if (i == 0) slot.dtype = g_tf.TF_TensorType(in);
    run->segment_in[static_cast<size_t>(i)] = g_tf.TF_TensorData(in);
    run->segment_count[static_cast<size_t>(i)] = g_tf.TF_TensorElementCount(in);
    total += run->segment_count[static_cast<size_t>(i)];
  }
  const int32_t dtype = core_type(slot.dtype);
  if (dtype < 0) {
    g_tf.TF_DeleteStatus(status);
    failure(kUnsupportedType,
            "ringcc.UnsupportedTypeError: tensor '" + k.base + "' has dtype " + dtype_name(slot.dtype) + kNotMoved);
    return;
  }
  slot.dims.assign(1, total);
  TF_Tensor* out = g_tf.TF_AllocateOutput(ctx, 0, slot.dtype, slot.dims.data(), 1,
                                          static_cast<size_t>(total) * type_size(dtype), status);
  if (g_tf.TF_GetCode(status) != TF_OK || !out) {
    failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
    g_tf.TF_DeleteStatus(status);
    return;
  }
  g_tf.TF_DeleteStatus(status);
  run->keep.push_back(out);
  static char empty;
  void* out_data = g_tf.TF_TensorData(out);
  RingccKernelCall call{};
  call.name = k.base.c_str();
  call.kind = kAllreduce;
  call.dtype = dtype;
  call.op = k.op;
  call.prescale = k.prescale;
  call.postscale = k.postscale;
  call.out = out_data ? out_data : &empty;
  call.count = total;
  call.out_count = total;
  call.row_elems = 1;
  call.shape = slot.dims.data();
  call.ndim = 1;
  call.nudge = k.nudge;
  call.layout = k.layout;
  call.segment_in = run->segment_in.data();
  call.segment_count = run->segment_count.data();
  call.n_segments = n;
  core->enqueue(&call, collective_done, &slot);
}

void compute(void* kernel_ptr, TF_OpKernelContext* ctx, TF_AsyncOpKernelDoneCallback* done_ptr) {
  const Kernel& k = *static_cast<Kernel*>(kernel_ptr);
  auto* run = new Run;
  run->ctx = ctx;
  run->kind = k.kind;
  run->kernel = &k;
  // See the top of the file: `done` dies when this function returns.
  run->done = std::move(*reinterpret_cast<std::function<void()>*>(done_ptr));
  const RingccKernelApi* core = g_core.load();
  if (!k.failure.empty()) {
    // The adapter refused this rank's arguments (an unknown reduction, a
    // scale factor that is no number) yet built the op, so that it takes
    // part in each of its collectives as a failed participant, under the
    // names its peers' ops use, rather than leaving them to wait.
    if (core) {
      // Several: this rank fails the group's others itself (its peers' engines
      // need not, Engine::note_group_rest).
      const int64_t layout = k.names.size() > 1 ? RINGCC_LAYOUT_GROUP_FAILED : k.layout;
      for (const std::string& name : k.names) core->fail(name.c_str(), k.kind, k.failure.c_str(), layout);
    }
    run->remaining.store(1);
    run->fail(kInvalidArgument, k.failure);
    run->one_done();
    return;
  }
  if (k.packed) {
    run->slots.resize(1);
    run->remaining.store(2);  // the collective and this function's hold
    enqueue_packed(k, ctx, run, core);
    run->one_done();
    return;
  }
  const int tensors = k.kind == kAlltoall ? 1 : g_tf.TF_NumInputs(ctx);
  run->slots.resize(static_cast<size_t>(tensors));
  run->remaining.store(tensors + 1);  // + 1: this function's own hold, so no callback finishes the run early
  TF_Status* status = g_tf.TF_NewStatus();
  const int32_t size = core ? core->size() : -1;
  const int32_t rank = core ? core->rank() : -1;

  for (int i = 0; i < tensors; ++i) {
    Run::Slot& slot = run->slots[static_cast<size_t>(i)];
    slot.run = run;
    slot.output = i;
    const std::string& name = k.names[static_cast<size_t>(i)];
    // An error before the collective reaches the engine: this rank fails the
    // call (its peers too, under the name) and takes no part.
    auto local_failure = [&](int32_t kind, const std::string& message) {
      run->fail(kind, message);
      if (core) core->fail(name.c_str(), k.kind, message.substr(message.find(": ") + 2).c_str(), k.layout);
      run->one_done();
    };
    if (!core || size < 1) {
      run->fail(kNotInitialized, "ringcc.NotInitializedError: ringcc is not initialized: call hvd.init() first");
      run->one_done();
      continue;
    }
    TF_Tensor* in = nullptr;
    g_tf.TF_GetInput(ctx, i, &in, status);
    if (g_tf.TF_GetCode(status) != TF_OK || !in) {
      local_failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
      g_tf.TF_SetStatus(status, TF_OK, "");
      continue;
    }
    slot.dtype = g_tf.TF_TensorType(in);
    const int ndim = g_tf.TF_NumDims(in);
    slot.dims.resize(static_cast<size_t>(ndim));
    int64_t rows = ndim > 0 ? 0 : 1;
    for (int d = 0; d < ndim; ++d) slot.dims[static_cast<size_t>(d)] = g_tf.TF_Dim(in, d);
    if (ndim > 0) rows = slot.dims[0];
    const int64_t count = g_tf.TF_TensorElementCount(in);
    slot.row_elems = 1;
    for (int d = 1; d < ndim; ++d) slot.row_elems *= slot.dims[static_cast<size_t>(d)];
    const int32_t dtype = core_type(slot.dtype);
    if (dtype < 0) {
      g_tf.TF_DeleteTensor(in);
      local_failure(kUnsupportedType, "ringcc.UnsupportedTypeError: tensor '" + name + "' has dtype " +
                                          dtype_name(slot.dtype) + kNotMoved);
      continue;
    }
    RingccKernelCall call{};
    call.name = name.c_str();
    call.kind = k.kind;
    call.dtype = dtype;
    call.op = k.op;
    call.root = k.root;
    call.prescale = k.prescale;
    call.postscale = k.postscale;
    call.count = count;
    call.row_elems = slot.row_elems;
    call.shape = slot.dims.data();
    call.ndim = ndim;
    // The last collective of the op starts the engine's cycle when asked.
    call.nudge = k.nudge && i == tensors - 1;
    call.layout = k.layout;
    const size_t bytes = static_cast<size_t>(count) * type_size(dtype);
    void* in_data = g_tf.TF_TensorData(in);
    if (k.kind == kAllreduce || k.kind == kBroadcast) {
      // In place when TensorFlow can hand the input over as the output.
      // (Our own reference to the input blocks forwarding: drop it first.)
      g_tf.TF_DeleteTensor(in);
      int forwarded = -1;
      TF_Tensor* out = g_tf.TF_ForwardInputOrAllocateOutput(ctx, &i, 1, i, slot.dims.data(), ndim, &forwarded, status);
      if (g_tf.TF_GetCode(status) != TF_OK || !out) {
        local_failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
        g_tf.TF_SetStatus(status, TF_OK, "");
        continue;
      }
      run->keep_tensor(out);
      call.out = g_tf.TF_TensorData(out);
      call.out_count = count;
      if (forwarded == i) {
        call.in = call.out;
      } else {
        g_tf.TF_GetInput(ctx, i, &in, status);
        run->keep_tensor(in);
        call.in = g_tf.TF_TensorData(in);
      }
    } else if (k.kind == kReduceScatter) {
      run->keep_tensor(in);
      call.in = in_data;
      if (ndim == 0) {
        local_failure(kInvalidArgument, "ringcc.InvalidArgumentError: reducescatter of '" + name +
                                            "': a tensor of rank 0 has no rows to scatter");
        continue;
      }
      // Rank r keeps its block of rows, the lower ranks one more.
      const int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
      std::vector<int64_t> dims = slot.dims;
      dims[0] = mine;
      TF_Tensor* out = g_tf.TF_AllocateOutput(ctx, i, slot.dtype, dims.data(), ndim,
                                              static_cast<size_t>(mine * slot.row_elems) * type_size(dtype), status);
      if (g_tf.TF_GetCode(status) != TF_OK || !out) {
        local_failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
        g_tf.TF_SetStatus(status, TF_OK, "");
        continue;
      }
      run->keep_tensor(out);
      call.out = g_tf.TF_TensorData(out);
      call.out_count = mine * slot.row_elems;
    } else {
      // allgather, alltoall: the output's rows are known once the ranks
      // have told theirs.
      run->keep_tensor(in);
      call.in = in_data;
      if (ndim == 0) {
        local_failure(kInvalidArgument, "ringcc.InvalidArgumentError: '" + name +
                                            "': a tensor of rank 0 has no first dimension");
        continue;
      }
      call.out = nullptr;
      call.out_count = -1;
      call.allocate = allocate_rows;
      call.allocate_ctx = &slot;
      if (k.kind == kAlltoall) {
        TF_Tensor* splits = nullptr;
        g_tf.TF_GetInput(ctx, 1, &splits, status);
        if (g_tf.TF_GetCode(status) != TF_OK || !splits) {
          local_failure(kInternal, std::string("ringcc.InternalError: ") + g_tf.TF_Message(status));
          g_tf.TF_SetStatus(status, TF_OK, "");
          continue;
        }
        const int64_t n = g_tf.TF_TensorElementCount(splits);
        const TF_DataType st = g_tf.TF_TensorType(splits);
        const void* sd = g_tf.TF_TensorData(splits);
        for (int64_t r = 0; r < n; ++r) {
          const int64_t v = st == TF_INT64 ? static_cast<const int64_t*>(sd)[r] : static_cast<const int32_t*>(sd)[r];
          run->send_counts.push_back(v * slot.row_elems);
        }
        g_tf.TF_DeleteTensor(splits);
        call.send_counts = run->send_counts.data();
        call.n_send_counts = static_cast<int32_t>(run->send_counts.size());
      }
    }
    (void)bytes;
    core->enqueue(&call, collective_done, &slot);
  }
  g_tf.TF_DeleteStatus(status);
  run->one_done();  // this function's hold
}

template <int32_t kKind>
void* create_of_kind(TF_OpKernelConstruction* ctx) {
  return create_kernel(ctx, kKind);
}

void* create_packed(TF_OpKernelConstruction* ctx) {
  auto* k = static_cast<Kernel*>(create_kernel(ctx, kAllreduce));
  k->packed = true;
  k->names.assign(1, k->base);
  return k;
}

// ---------------------------------------------------------------------------
// Shapes.

void same_shapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  const int64_t n = g_tf.TF_ShapeInferenceContextNumInputs(ctx);
  TF_ShapeHandle* shape = g_tf.TF_NewShapeHandle();
  for (int64_t i = 0; i < n; ++i) {
    g_tf.TF_ShapeInferenceContextGetInput(ctx, static_cast<int>(i), shape, status);
    if (g_tf.TF_GetCode(status) != TF_OK) break;
    g_tf.TF_ShapeInferenceContextSetOutput(ctx, static_cast<int>(i), shape, status);
    if (g_tf.TF_GetCode(status) != TF_OK) break;
  }
  g_tf.TF_DeleteShapeHandle(shape);
}

// The first dimension depends on the other ranks: ringcc.tensorflow sets
// what it knows of the shape on the op's outputs.
void unknown_shapes(TF_ShapeInferenceContext* ctx, TF_Status* status) {
  g_tf.TF_ShapeInferenceContextSetUnknownShape(ctx, status);
}

// ---------------------------------------------------------------------------
// Registration.

// Every dtype a user may hand over: those ringcc does not move (complex,
// string) reach the kernel, which fails the call on every rank with
// UnsupportedTypeError, rather than TensorFlow refusing the op on this
// rank alone while its peers wait for it.
const char* const kTypes =
    "T: {half, bfloat16, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool, "
    "complex64, complex128, string}";

bool register_op(const char* op_name, int32_t kind, const std::vector<const char*>& attrs, const char* inputs[],
                 const char* outputs[], bool same_shape, std::string* error) {
  TF_Status* status = g_tf.TF_NewStatus();
  TF_OpDefinitionBuilder* b = g_tf.TF_NewOpDefinitionBuilder(op_name);
  for (const char* a : attrs) g_tf.TF_OpDefinitionBuilderAddAttr(b, a);
  for (int i = 0; inputs[i]; ++i) g_tf.TF_OpDefinitionBuilderAddInput(b, inputs[i]);
  for (int i = 0; outputs[i]; ++i) g_tf.TF_OpDefinitionBuilderAddOutput(b, outputs[i]);
  // Never pruned, never merged with an identical op, never constant-folded.
  g_tf.TF_OpDefinitionBuilderSetIsStateful(b, true);
  g_tf.TF_OpDefinitionBuilderSetShapeInferenceFunction(b, same_shape ? same_shapes : unknown_shapes);
  g_tf.TF_RegisterOpDefinition(b, status);
  bool ok = g_tf.TF_GetCode(status) == TF_OK;
  if (ok) {
    CreateFunction create = nullptr;
    switch (kind) {
      case kAllreduce:
        create = create_of_kind<kAllreduce>;
        break;
      case kPackedAllreduce:
        create = create_packed;
        break;
      case kAllgather:
        create = create_of_kind<kAllgather>;
        break;
      case kBroadcast:
        create = create_of_kind<kBroadcast>;
        break;
      case kReduceScatter:
        create = create_of_kind<kReduceScatter>;
        break;
      default:
        create = create_of_kind<kAlltoall>;
        break;
    }
    TF_KernelBuilder* kb = g_tf.TF_NewAsyncKernelBuilder(op_name, "CPU", create, compute, delete_kernel);
    g_tf.TF_RegisterKernelBuilder((std::string(op_name) + "_CPU").c_str(), kb, status);
    ok = g_tf.TF_GetCode(status) == TF_OK;
  }
  if (!ok) *error = std::string(op_name) + ": " + g_tf.TF_Message(status);
  g_tf.TF_DeleteStatus(status);
  return ok;
}

__attribute__((constructor)) void register_everything() {
  if (!find_tensorflow()) return;
  const std::vector<const char*> common = {kTypes, "N: int >= 1", "tensor_name: string = ''", "nudge: bool = false",
                                           "failure: string = ''"};
  const char* tensors_in[] = {"tensors: N * T", nullptr};
  const char* tensors_out[] = {"outputs: N * T", nullptr};
  std::vector<const char*> reduce = common;
  reduce.push_back("reduce_op: int = 0");
  reduce.push_back("prescale_factor: float = 1.0");
  reduce.push_back("postscale_factor: float = 1.0");
  reduce.push_back("layout: int = 0");
  reduce.push_back("layout_text: string = ''");
  std::vector<const char*> gather = common;
  gather.push_back("layout: int = 0");
  gather.push_back("layout_text: string = ''");
  std::vector<const char*> bcast = common;
  bcast.push_back("root_rank: int = 0");
  const std::vector<const char*> one = {kTypes, "tensor_name: string = ''", "nudge: bool = false",
                                        "failure: string = ''"};
  const char* a2a_in[] = {"tensor: T", "splits: Tsplits", nullptr};
  const char* a2a_out[] = {"output: T", "received_splits: int64", nullptr};
  std::vector<const char*> a2a = one;
  a2a.push_back("Tsplits: {int32, int64} = DT_INT64");
  std::string error;
  const char* packed_out[] = {"packed: T", nullptr};
  if (!register_op("RingccAllreduce", kAllreduce, reduce, tensors_in, tensors_out, true, &error) ||
      !register_op("RingccPackedAllreduce", kPackedAllreduce, reduce, tensors_in, packed_out, false, &error) ||
      !register_op("RingccAllgather", kAllgather, gather, tensors_in, tensors_out, false, &error) ||
      !register_op("RingccBroadcast", kBroadcast, bcast, tensors_in, tensors_out, true, &error) ||
      !register_op("RingccReducescatter", kReduceScatter, reduce, tensors_in, tensors_out, false, &error) ||
      !register_op("RingccAlltoall", kAlltoall, a2a, a2a_in, a2a_out, false, &error)) {
    g_load_error = "registering ringcc's TensorFlow ops failed: " + error;
  }
}

}  // namespace

extern "C" {

// Why the ops were not registered ("" when they were).
__attribute__((visibility("default"))) const char* ringcc_tf_load_error() { return g_load_error.c_str(); }

// Gives the kernels ringcc._core's table (bindings/kernel_api.h); 0 on
// success, -1 when its version or size does not match this library's.
__attribute__((visibility("default"))) int ringcc_tf_bind(const RingccKernelApi* api) {
  if (!api || api->version != RINGCC_KERNEL_API_VERSION || api->struct_size < sizeof(RingccKernelApi)) return -1;
  g_core.store(api);
  return 0;
}
}
