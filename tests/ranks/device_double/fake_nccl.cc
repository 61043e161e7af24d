// A stand-in for NCCL (libnccl.so.2), for tests on machines without a GPU,
// used with the stand-in CUDA driver (fake_cuda.cc: "device" pointers are
// host pointers). It is a test double: it moves the data of ringcc's NCCL
// backend between processes through a file mapped by every rank of a
// communicator, and never measures anything.
//
// Communicators are non-blocking the way NCCL's are with config.blocking =
// 0: a call starts its work and returns ncclInProgress until every rank has
// reached it; ncclCommGetAsyncError moves it on and answers ncclInProgress,
// then ncclSuccess. Calls between ncclGroupStart and ncclGroupEnd run as
// one step. Each step: every rank writes what the others need into its slot
// of the file and arrives at a counter; once all have arrived, each rank
// computes its outputs (reductions with ringcc's own kernel source compiled
// as host code) and arrives at a second counter; once all have arrived
// there, the slots are free again.
//
//   RINGCC_FAKE_CUDA_DIR        where the files live (default /dev/shm)
//   RINGCC_FAKE_NCCL_SLOT_BYTES bytes a rank may contribute per step (16 MiB)
#define RINGCC_KERNELS_ON_HOST
#include "core/device/reduce_kernels.cuh"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device/nccl_api.h"

thread_local RingccDim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
thread_local RingccDim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};

using namespace ringcc::nccl;

namespace {

constexpr size_t kHeaderBytes = 4096;
constexpr size_t kDirectoryBytes = 8192;
constexpr int kMaxSends = 300;

struct Counters {
  std::atomic<uint64_t> init;
  std::atomic<uint64_t> arrived[2];
};

struct SendEntry {
  int32_t peer;
  int32_t pad;
  uint64_t offset;
  uint64_t bytes;
};

struct Directory {
  int32_t sends;
  int32_t pad;
  SendEntry entries[kMaxSends];
};
static_assert(sizeof(Directory) <= kDirectoryBytes, "directory too large");

enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kSend, kRecv };

struct Op {
  Kind kind;
  const void* in;
  void* out;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int peer;  // root, or send/recv peer
  size_t offset = 0;
};

thread_local std::string g_last_error;
thread_local int g_group_depth = 0;
thread_local std::vector<std::pair<ncclComm*, Op>> g_group;

size_t slot_bytes() {
  const char* s = std::getenv("RINGCC_FAKE_NCCL_SLOT_BYTES");
  return s && *s ? static_cast<size_t>(std::atoll(s)) : size_t{16} << 20;
}

std::string dir() {
  const char* d = std::getenv("RINGCC_FAKE_CUDA_DIR");
  return d && *d ? d : "/dev/shm";
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

const char* type_name(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclInt64:
      return "int64";
    case ncclFloat16:
      return "float16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
    case ncclBfloat16:
      return "bfloat16";
    default:
      return nullptr;
  }
}

using ReduceFn = void (*)(void*, RingccSources, int, long long, double);
using ScaleFn = void (*)(void*, const void*, long long, double);

#define RINGCC_FAKE_TYPE(name)                                                   \
  if (std::strcmp(dt, #name) == 0) {                                             \
    if (std::strcmp(op, "sum") == 0) return &ringcc_reduce_##name##_sum;         \
    if (std::strcmp(op, "min") == 0) return &ringcc_reduce_##name##_min;         \
    if (std::strcmp(op, "max") == 0) return &ringcc_reduce_##name##_max;         \
    if (std::strcmp(op, "product") == 0) return &ringcc_reduce_##name##_product; \
  }
ReduceFn reduce_fn(const char* dt, const char* op) {
  RINGCC_FAKE_TYPE(float16)
  RINGCC_FAKE_TYPE(bfloat16) RINGCC_FAKE_TYPE(float32) RINGCC_FAKE_TYPE(float64) RINGCC_FAKE_TYPE(int8)
      RINGCC_FAKE_TYPE(uint8) RINGCC_FAKE_TYPE(int32) RINGCC_FAKE_TYPE(int64) return nullptr;
}
#undef RINGCC_FAKE_TYPE
#define RINGCC_FAKE_TYPE(name) \
  if (std::strcmp(dt, #name) == 0) return &ringcc_scale_##name;
ScaleFn scale_fn(const char* dt) {
  RINGCC_FAKE_TYPE(float16)
  RINGCC_FAKE_TYPE(bfloat16) RINGCC_FAKE_TYPE(float32) RINGCC_FAKE_TYPE(float64) RINGCC_FAKE_TYPE(int8)
      RINGCC_FAKE_TYPE(uint8) RINGCC_FAKE_TYPE(int32) RINGCC_FAKE_TYPE(int64) return nullptr;
}
#undef RINGCC_FAKE_TYPE

}  // namespace

// A communicator: the shared file and this rank's place in the steps.
struct ncclComm {
  int n = 0, rank = 0;
  uint8_t* base = nullptr;
  size_t file_bytes = 0;
  bool init_pending = false;
  uint64_t step = 0;    // steps this rank has started
  int phase = 0;        // 0: idle, 1: waiting for everyone's inputs, 2: waiting for everyone's reads
  std::vector<Op> ops;  // the step under way
  ncclResult_t error = ncclSuccess;

  Counters* counters() { return reinterpret_cast<Counters*>(base); }
  Directory* directory(int r) { return reinterpret_cast<Directory*>(base + kHeaderBytes + r * kDirectoryBytes); }
  uint8_t* slot(int r) { return base + kHeaderBytes + n * kDirectoryBytes + r * slot_bytes(); }
};

namespace {

ncclResult_t fail(ncclComm* c, ncclResult_t r, const std::string& why) {
  g_last_error = "stand-in NCCL (test double): " + why;
  if (c) c->error = r;
  return r;
}

bool everyone(ncclComm* c, int which) {
  return c->counters()->arrived[which].load() >= static_cast<uint64_t>(c->n) * c->step;
}

// Phase 1: my contributions into my slot, then arrive.
ncclResult_t start(ncclComm* c, std::vector<Op> ops) {
  if (c->phase != 0) return fail(c, ncclInvalidUsage, "a call while the previous one is in progress");
  size_t offset = 0, sends = 0;
  Directory* d = c->directory(c->rank);
  for (Op& o : ops) {
    const size_t es = type_size(o.type);
    size_t bytes = 0;
    switch (o.kind) {
      case Kind::kAllReduce:
      case Kind::kBroadcast:
      case Kind::kReduce:
      case Kind::kAllGather:
        bytes = o.count * es;
        break;
      case Kind::kReduceScatter:
        bytes = o.count * es * c->n;
        break;
      case Kind::kSend:
        bytes = o.count * es;
        break;
      case Kind::kRecv:
        break;
    }
    if (offset + bytes > slot_bytes())
      return fail(c, ncclInvalidUsage, "a step larger than RINGCC_FAKE_NCCL_SLOT_BYTES");
    o.offset = offset;
    const bool contributes = o.kind != Kind::kRecv && (o.kind != Kind::kBroadcast || o.peer == c->rank);
    if (contributes && bytes) std::memcpy(c->slot(c->rank) + offset, o.in, bytes);
    if (o.kind == Kind::kSend) {
      if (sends >= static_cast<size_t>(kMaxSends)) return fail(c, ncclInvalidUsage, "too many sends in a group");
      d->entries[sends++] = {o.peer, 0, offset, bytes};
    }
    offset += bytes;
  }
  d->sends = static_cast<int32_t>(sends);
  c->ops = std::move(ops);
  c->step += 1;
  c->phase = 1;
  c->counters()->arrived[0].fetch_add(1);
  return ncclInProgress;
}

// Phases 2 and 3; returns ncclInProgress until the step is over.
ncclResult_t advance(ncclComm* c) {
  if (c->error != ncclSuccess) return c->error;
  if (c->init_pending) {
    if (c->counters()->init.load() < static_cast<uint64_t>(c->n)) return ncclInProgress;
    c->init_pending = false;
  }
  if (c->phase == 1) {
    if (!everyone(c, 0)) return ncclInProgress;
    std::vector<int> received(static_cast<size_t>(c->n), 0);
    for (const Op& o : c->ops) {
      const size_t es = type_size(o.type);
      const char* dt = type_name(o.type);
      if (!dt) return fail(c, ncclInvalidArgument, "unsupported data type");
      RingccSources s{};
      auto reduce_into = [&](void* out, size_t extra, size_t count) -> ncclResult_t {
        for (int r = 0; r < c->n; ++r) s.ptr[r] = c->slot(r) + o.offset + extra;
        const char* name = o.op == ncclSum || o.op == ncclAvg ? "sum"
                           : o.op == ncclProd                 ? "product"
                           : o.op == ncclMax                  ? "max"
                                                              : "min";
        reduce_fn(dt, name)(out, s, c->n, static_cast<long long>(count), 1.0);
        if (o.op == ncclAvg) scale_fn(dt)(out, out, static_cast<long long>(count), 1.0 / c->n);
        return ncclSuccess;
      };
      switch (o.kind) {
        case Kind::kAllReduce:
          reduce_into(o.out, 0, o.count);
          break;
        case Kind::kReduce:
          if (o.peer == c->rank) reduce_into(o.out, 0, o.count);
          break;
        case Kind::kReduceScatter:
          reduce_into(o.out, c->rank * o.count * es, o.count);
          break;
        case Kind::kBroadcast:
          std::memcpy(o.out, c->slot(o.peer) + o.offset, o.count * es);
          break;
        case Kind::kAllGather:
          for (int r = 0; r < c->n; ++r) {
            std::memcpy(static_cast<uint8_t*>(o.out) + r * o.count * es, c->slot(r) + o.offset, o.count * es);
          }
          break;
        case Kind::kSend:
          break;
        case Kind::kRecv: {
          Directory* d = c->directory(o.peer);
          int seen = 0;
          bool found = false;
          for (int i = 0; i < d->sends; ++i) {
            if (d->entries[i].peer != c->rank) continue;
            if (seen++ < received[static_cast<size_t>(o.peer)]) continue;
            if (d->entries[i].bytes != o.count * es) return fail(c, ncclInvalidUsage, "send and receive sizes differ");
            std::memcpy(o.out, c->slot(o.peer) + d->entries[i].offset, o.count * es);
            found = true;
            break;
          }
          if (!found) return fail(c, ncclInvalidUsage, "a receive without its send");
          received[static_cast<size_t>(o.peer)] += 1;
          break;
        }
      }
    }
    c->phase = 2;
    c->counters()->arrived[1].fetch_add(1);
  }
  if (c->phase == 2) {
    if (!everyone(c, 1)) return ncclInProgress;
    c->phase = 0;
    c->ops.clear();
  }
  return ncclSuccess;
}

ncclResult_t submit(ncclComm* c, Op op) {
  if (!c) return fail(nullptr, ncclInvalidArgument, "null communicator");
  if (c->error != ncclSuccess) return c->error;
  if (g_group_depth > 0) {
    g_group.emplace_back(c, op);
    return ncclSuccess;
  }
  const ncclResult_t r = start(c, {op});
  return r == ncclInProgress ? advance(c) : r;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* v) {
  *v = 22809;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unhandled error";
  }
}
const char* ncclGetLastError(ncclComm_t) { return g_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::random_device rd;
  std::memset(id->internal, 0, sizeof(id->internal));
  for (int i = 0; i < 16; ++i) id->internal[i] = static_cast<char>(rd() & 0xff);
  return ncclSuccess;
}

static ncclResult_t init(ncclComm_t* out, int n, ncclUniqueId id, int rank, bool blocking) {
  char name[64];
  const auto* b = reinterpret_cast<const unsigned char*>(id.internal);
  std::snprintf(name, sizeof(name), "rcnccl-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                b[7]);
  auto* c = new ncclComm;
  c->n = n;
  c->rank = rank;
  c->file_bytes = kHeaderBytes + n * kDirectoryBytes + n * slot_bytes();
  const std::string path = dir() + "/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(c->file_bytes)) != 0) {
    delete c;
    return fail(nullptr, ncclSystemError, "cannot create " + path);
  }
  void* p = ::mmap(nullptr, c->file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    delete c;
    return fail(nullptr, ncclSystemError, "cannot map " + path);
  }
  c->base = static_cast<uint8_t*>(p);
  c->counters()->init.fetch_add(1);
  c->init_pending = true;
  *out = c;
  if (!blocking) return ncclInProgress;
  while (advance(c) == ncclInProgress) ::usleep(100);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* c, int n, ncclUniqueId id, int rank) { return init(c, n, id, rank, true); }
ncclResult_t ncclCommInitRankConfig(ncclComm_t* c, int n, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!config || config->magic != kNcclApiMagic || config->size < 32) {
    return fail(nullptr, ncclInvalidArgument, "ncclConfig_t not initialised like NCCL_CONFIG_INITIALIZER");
  }
  return init(c, n, id, rank, config->blocking != 0);
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (c) {
    ::munmap(c->base, c->file_bytes);
    delete c;
  }
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* state) {
  *state = advance(c);
  return ncclSuccess;
}
ncclResult_t ncclCommCount(ncclComm_t c, int* n) {
  *n = c->n;
  return ncclSuccess;
}
ncclResult_t ncclCommCuDevice(ncclComm_t, int* d) {
  *d = 0;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(ncclComm_t c, int* r) {
  *r = c->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t) {
  return submit(c, {Kind::kAllReduce, in, out, count, t, op, 0});
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t) {
  return submit(c, {Kind::kBroadcast, in, out, count, t, ncclSum, root});
}
ncclResult_t ncclReduce(const void* in, void* out, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t) {
  return submit(c, {Kind::kReduce, in, out, count, t, op, root});
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t t, ncclComm_t c, cudaStream_t) {
  return submit(c, {Kind::kAllGather, in, out, count, t, ncclSum, 0});
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t) {
  return submit(c, {Kind::kReduceScatter, in, out, count, t, op, 0});
}
ncclResult_t ncclSend(const void* in, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t) {
  return submit(c, {Kind::kSend, in, nullptr, count, t, ncclSum, peer});
}
ncclResult_t ncclRecv(void* out, size_t count, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t) {
  return submit(c, {Kind::kRecv, nullptr, out, count, t, ncclSum, peer});
}
ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) return fail(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--g_group_depth > 0) return ncclSuccess;
  std::vector<std::pair<ncclComm*, Op>> group;
  group.swap(g_group);
  if (group.empty()) return ncclSuccess;
  ncclComm* c = group.front().first;
  std::vector<Op> ops;
  for (auto& [comm, op] : group) {
    if (comm != c) return fail(c, ncclInvalidUsage, "a group over several communicators");
    ops.push_back(op);
  }
  const ncclResult_t r = start(c, std::move(ops));
  return r == ncclInProgress ? advance(c) : r;
}

}  // extern "C"
