#include "core/collective/op_header.h"

#include <cstring>
#include <sstream>

#include "core/base/error.h"
#include "core/collective/collective_args.h"

namespace ringcc {

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host memory";
    case MemoryKind::kCuda:
      return "CUDA device memory";
  }
  return "unknown memory";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAlltoall:
      return "alltoall";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kLocalError:
      return "a failed call";
  }
  return "an unknown collective";
}

std::string failed_call_text(int rank, CollectiveKind kind, const std::string& reason) {
  // Reasons often start with the collective's name already.
  const std::string name = collective_name(kind);
  const bool named = reason.compare(0, name.size() + 2, name + ": ") == 0;
  return "rank " + std::to_string(rank) + " could not start " + name + ": " +
         (named ? reason.substr(name.size() + 2) : reason);
}

namespace {

// "rank 0: X, rank 1: Y" listing each rank's value of a field.
template <typename Field>
std::string list_values(const std::vector<OpHeader>& headers, const std::vector<int>& ranks, Field field) {
  std::ostringstream os;
  for (size_t i = 0; i < headers.size(); ++i) {
    if (i) os << ", ";
    os << "rank " << ranks[i] << ": " << field(headers[i]);
  }
  return os.str();
}

template <typename Field>
bool all_equal(const std::vector<OpHeader>& headers, Field field) {
  for (const auto& h : headers) {
    if (!(field(h) == field(headers[0]))) return false;
  }
  return true;
}

// Slots of h.shape in use: every dimension, or past kShapeSlots the first
// ones and the hash of the rest.
int used_slots(const OpHeader& h) { return h.ndim < kShapeSlots ? h.ndim : kShapeSlots; }

// Slots that hold dimensions themselves (the hash, if any, follows them).
int direct_slots(const OpHeader& h) { return h.ndim <= kShapeSlots ? h.ndim : kShapeSlots - 1; }

std::string header_shape_text(const OpHeader& h) {
  std::string text = shape_text(h.shape, static_cast<size_t>(direct_slots(h)));
  if (h.ndim > kShapeSlots) text.insert(text.size() - 1, ", ... (" + std::to_string(h.ndim) + " dimensions)");
  return text;
}

// Whether a's and b's shapes agree, in every dimension or (skip_first)
// in those after the first.
bool same_shape(const OpHeader& a, const OpHeader& b, bool skip_first) {
  if (a.ndim != b.ndim) return false;
  for (int i = skip_first ? 1 : 0; i < used_slots(a); ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

bool shapes_agree(const std::vector<OpHeader>& headers, bool skip_first) {
  for (const auto& h : headers) {
    if (!same_shape(h, headers[0], skip_first)) return false;
  }
  return true;
}

// Sizes no rank can have sent (a corrupt header). A rank that failed
// locally may send any sizes, and no shape.
bool impossible_sizes(const OpHeader& h) {
  if (h.kind == static_cast<int32_t>(CollectiveKind::kLocalError)) return false;
  if (h.count < 0 || h.row_elems < 0 || h.out_count < -1 || h.ndim < kFusedShapes) return true;
  for (int i = 0; i < direct_slots(h); ++i) {
    if (h.shape[i] < 0) return true;
  }
  return false;
}

// The sizes (and shapes, where every rank gave one) that the ranks of a
// collective of `kind` must agree on.
void check_sizes(const std::vector<OpHeader>& headers, const std::vector<int>& ranks, CollectiveKind kind) {
  const char* name = collective_name(kind);
  bool shaped = true;
  for (const auto& h : headers) shaped = shaped && h.ndim >= 0;
  auto count_of = [](const OpHeader& h) { return h.count; };
  auto row_of = [](const OpHeader& h) { return h.row_elems; };
  auto shapes = [&] {
    std::string text = list_values(headers, ranks, header_shape_text);
    for (const auto& h : headers) {
      if (h.ndim > kShapeSlots) return text + "; the header holds " + std::to_string(kShapeSlots - 1) + " dimensions";
    }
    return text;
  };
  if (kind == CollectiveKind::kAllgather || kind == CollectiveKind::kAlltoall) {
    // The first dimension may differ: each rank brings its own rows.
    if (shaped && !shapes_agree(headers, true)) {
      raise(ErrorKind::kMismatch, name, ": ranks disagree on the shape after the first dimension (", shapes(), ")");
    }
    if (!all_equal(headers, row_of)) {
      raise(ErrorKind::kMismatch, name, ": ranks disagree on the shape after the first dimension (",
            "elements per row: ", list_values(headers, ranks, row_of), ")");
    }
    return;
  }
  if (!all_equal(headers, count_of)) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on the number of elements (",
          list_values(headers, ranks, count_of), ")", shaped ? " and the shape (" + shapes() + ")" : "");
  }
  // Tensors of a grouped call fused into one allreduce: the hash of their shapes.
  bool fused = true;
  for (const auto& h : headers) fused = fused && h.ndim == kFusedShapes;
  if (fused && !all_equal(headers, [](const OpHeader& h) { return h.shape[0]; })) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on the shapes of the tensors fused into it, ",
          "though not on their number of elements (", list_values(headers, ranks, count_of), ")");
  }
  if (shaped && !shapes_agree(headers, false)) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on the shape (", shapes(), ")");
  }
  if (kind == CollectiveKind::kReduceScatter && !all_equal(headers, row_of)) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on the shape after the first dimension (",
          "elements per row: ", list_values(headers, ranks, row_of), ")");
  }
}

// Outputs that callers sized themselves must fit what arrives.
void check_outputs(const std::vector<OpHeader>& headers, const std::vector<int>& ranks,
                   const std::vector<int64_t>& alltoall_counts, CollectiveKind kind) {
  const size_t n = headers.size();
  const char* name = collective_name(kind);
  for (size_t r = 0; r < n; ++r) {
    int64_t want = 0;
    bool overflow = false;
    if (kind == CollectiveKind::kAllgather) {
      for (const auto& h : headers) overflow |= __builtin_add_overflow(want, h.count, &want);
    } else if (kind == CollectiveKind::kAlltoall) {
      for (size_t s = 0; s < n; ++s) overflow |= __builtin_add_overflow(want, alltoall_counts[s * n + r], &want);
    } else {
      continue;
    }
    if (overflow) {
      raise(ErrorKind::kMismatch, name, ": rank ", ranks[r], " would receive more than 2^63 elements (",
            list_values(headers, ranks, [](const OpHeader& h) { return h.count; }), ")");
    }
    if (headers[r].out_count >= 0 && headers[r].out_count != want) {
      raise(ErrorKind::kMismatch, name, ": rank ", ranks[r], "'s output holds ", headers[r].out_count, " elements but ",
            want, " arrive");
    }
  }
}

}  // namespace

std::string shape_text(const int64_t* dims, size_t ndim) {
  std::string text = "[";
  for (size_t i = 0; i < ndim; ++i) {
    if (i) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

int64_t shape_hash(const int64_t* dims, int ndim, int64_t seed) {
  // FNV-1a over the number of dimensions and the dimensions.
  uint64_t hash = static_cast<uint64_t>(seed) ^ 14695981039346656037ull;
  auto mix = [&hash](uint64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (v >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(ndim));
  for (int i = 0; i < ndim; ++i) mix(static_cast<uint64_t>(dims[i]));
  return static_cast<int64_t>(hash);
}

void set_shape(OpHeader& h, const int64_t* dims, int ndim) {
  h.ndim = ndim;
  if (ndim == kFusedShapes) {
    h.shape[0] = dims[0];
    return;
  }
  const int direct = direct_slots(h);
  for (int i = 0; i < direct; ++i) h.shape[i] = dims[i];
  if (ndim > kShapeSlots) h.shape[kShapeSlots - 1] = shape_hash(dims + direct, ndim - direct, 0);
}

void check_agreement(const std::vector<OpHeader>& headers, const std::vector<int>& ranks,
                     const std::vector<int64_t>& alltoall_counts, int my_index) {
  const size_t n = headers.size();
  // Sizes that no rank can have sent: refused before any arithmetic on them.
  for (size_t i = 0; i < n; ++i) {
    if (headers[i].magic != OpHeader().magic || impossible_sizes(headers[i])) {
      raise(ErrorKind::kInternal, "corrupt collective header from rank ", ranks[i]);
    }
  }
  // A rank that failed locally: it raises its own error, everyone else
  // learns why.
  const auto local_error = static_cast<int32_t>(CollectiveKind::kLocalError);
  const OpHeader& mine = headers[static_cast<size_t>(my_index)];
  if (mine.kind == local_error) {
    raise(ErrorKind::kInvalidArgument, std::string(mine.reason, strnlen(mine.reason, sizeof(mine.reason))));
  }
  for (size_t i = 0; i < n; ++i) {
    const OpHeader& h = headers[i];
    if (h.kind != local_error) continue;
    const std::string reason(h.reason, strnlen(h.reason, sizeof(h.reason)));
    raise(ErrorKind::kMismatch, failed_call_text(ranks[i], static_cast<CollectiveKind>(h.failed_kind), reason));
  }
  auto kind_of = [](const OpHeader& h) { return collective_name(static_cast<CollectiveKind>(h.kind)); };
  if (!all_equal(headers, [](const OpHeader& h) { return h.kind; })) {
    raise(ErrorKind::kMismatch, "ranks called different collectives (", list_values(headers, ranks, kind_of), ")");
  }
  const auto kind = static_cast<CollectiveKind>(headers[0].kind);
  const char* name = collective_name(kind);
  if (kind == CollectiveKind::kBarrier) return;

  auto memory_of = [](const OpHeader& h) { return memory_kind_name(static_cast<MemoryKind>(h.memory)); };
  if (!all_equal(headers, [](const OpHeader& h) { return h.memory; })) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on where the data lives (",
          list_values(headers, ranks, memory_of), "); pass tensors of the same kind of memory on every rank");
  }

  auto dtype_of = [](const OpHeader& h) { return dtype_name(static_cast<DataType>(h.dtype)); };
  if (!all_equal(headers, [](const OpHeader& h) { return h.dtype; })) {
    raise(ErrorKind::kMismatch, name, ": ranks disagree on the dtype (", list_values(headers, ranks, dtype_of), ")");
  }
  auto op_of = [](const OpHeader& h) { return reduce_op_name(static_cast<ReduceOp>(h.op)); };
  auto root_of = [](const OpHeader& h) { return h.root; };

  switch (kind) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kReduceScatter:
      check_sizes(headers, ranks, kind);
      if (!all_equal(headers, [](const OpHeader& h) { return h.op; })) {
        raise(ErrorKind::kMismatch, name, ": ranks disagree on the reduction (", list_values(headers, ranks, op_of),
              ")");
      }
      break;
    case CollectiveKind::kBroadcast:
      if (!all_equal(headers, root_of)) {
        raise(ErrorKind::kMismatch, name, ": ranks disagree on the root (", list_values(headers, ranks, root_of), ")");
      }
      check_sizes(headers, ranks, kind);
      break;
    case CollectiveKind::kAllgather:
    case CollectiveKind::kAlltoall:
      if (kind == CollectiveKind::kAlltoall && alltoall_counts.size() != n * n) {
        raise(ErrorKind::kInternal, name, ": the ranks' counts did not arrive");
      }
      for (size_t i = 0; i < alltoall_counts.size(); ++i) {
        if (alltoall_counts[i] < 0) raise(ErrorKind::kInternal, "corrupt alltoall counts from rank ", ranks[i / n]);
      }
      check_sizes(headers, ranks, kind);
      break;
    default:
      raise(ErrorKind::kInternal, "unknown collective kind ", headers[0].kind);
  }
  check_outputs(headers, ranks, alltoall_counts, kind);
}

}  // namespace ringcc
