#include "core/engine/tensor_meta.h"

#include <sstream>

#include "core/base/error.h"
#include "core/base/wire.h"

namespace ringcc {

int64_t TensorMeta::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorMeta::row_elems() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

bool TensorMeta::operator==(const TensorMeta& o) const {
  return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root && prescale == o.prescale &&
         postscale == o.postscale && shape == o.shape && memory == o.memory && layout == o.layout;
}

void TensorMeta::serialize(std::string* out) const {
  put_u8(out, static_cast<uint8_t>(kind));
  put_u8(out, static_cast<uint8_t>(dtype));
  put_u8(out, static_cast<uint8_t>(op));
  put_i32(out, root);
  put_f64(out, prescale);
  put_f64(out, postscale);
  put_u8(out, static_cast<uint8_t>(memory));
  put_i64(out, layout);
  put_u8(out, static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) put_i64(out, d);
}

TensorMeta TensorMeta::parse(const std::string& in, size_t* pos) {
  TensorMeta m;
  m.kind = static_cast<CollectiveKind>(get_u8(in, pos));
  m.dtype = static_cast<DataType>(get_u8(in, pos));
  m.op = static_cast<ReduceOp>(get_u8(in, pos));
  m.root = get_i32(in, pos);
  m.prescale = get_f64(in, pos);
  m.postscale = get_f64(in, pos);
  m.memory = static_cast<MemoryKind>(get_u8(in, pos));
  m.layout = get_i64(in, pos);
  const uint8_t ndim = get_u8(in, pos);
  // Every size computed from a shape (elements, elements per row, bytes)
  // must fit in 64 bits; a first dimension of 0 must not hide the rest.
  int64_t elements = 1, row = 1;
  for (uint8_t i = 0; i < ndim; ++i) {
    const int64_t d = get_i64(in, pos);
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements ||
        (i > 0 && (__builtin_mul_overflow(row, d, &row) || row > kMaxElements))) {
      raise(ErrorKind::kInternal, "malformed tensor description: impossible shape");
    }
    m.shape.push_back(d);
  }
  return m;
}

bool compatible(const TensorMeta& a, const TensorMeta& b) {
  if (a.kind == CollectiveKind::kLocalError || a.kind != b.kind || a.dtype != b.dtype || a.op != b.op ||
      a.root != b.root || a.prescale != b.prescale || a.postscale != b.postscale || a.shape.size() != b.shape.size() ||
      a.memory != b.memory || a.layout != b.layout) {
    return false;
  }
  const bool ragged = a.kind == CollectiveKind::kAllgather || a.kind == CollectiveKind::kAlltoall;
  for (size_t i = ragged ? 1 : 0; i < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

std::string describe_disagreement(const std::string& name, const std::vector<TensorMeta>& metas,
                                  const std::vector<int>& ranks) {
  bool all_compatible = true;
  for (const auto& m : metas) all_compatible = all_compatible && compatible(m, metas[0]);
  if (all_compatible) return "";
  auto listing = [&](auto field) {
    std::ostringstream os;
    for (size_t i = 0; i < metas.size(); ++i) os << (i ? ", " : "") << "rank " << ranks[i] << ": " << field(metas[i]);
    return os.str();
  };
  auto differs = [&](auto field) {
    for (const auto& m : metas) {
      if (!(field(m) == field(metas[0]))) return true;
    }
    return false;
  };
  const std::string head = "tensor '" + name + "': ranks disagree on ";
  auto layout = [](const TensorMeta& m) { return m.layout; };
  // Layouts that differ as well as what is reported first are listed too:
  // an adapter reads the ranks' group lengths from them (report_missing and
  // fail_rest_of_groups in ringcc.failed_calls, the TensorFlow op library).
  const std::string grouped = "the shapes of the tensors packed into it or grouped with it (digests ";
  const std::string and_layouts = differs(layout) ? ", and " + grouped + listing(layout) + ")" : "";
  auto kind = [](const TensorMeta& m) { return std::string(collective_name(m.kind)); };
  if (differs(kind)) return head + "the collective (" + listing(kind) + ")" + and_layouts;
  auto dtype = [](const TensorMeta& m) { return std::string(dtype_name(m.dtype)); };
  if (differs(dtype)) return head + "the dtype (" + listing(dtype) + ")" + and_layouts;
  auto memory = [](const TensorMeta& m) { return std::string(memory_kind_name(m.memory)); };
  if (differs(memory)) return head + "where the tensor lives (" + listing(memory) + ")" + and_layouts;
  const CollectiveKind k = metas[0].kind;
  const bool ragged = k == CollectiveKind::kAllgather || k == CollectiveKind::kAlltoall;
  auto shape = [](const TensorMeta& m) { return shape_text(m.shape.data(), m.shape.size()); };
  if (ragged) {
    // The first dimension may differ (each rank brings its own rows).
    auto rest = [](const TensorMeta& m) {
      return m.shape.empty() ? m.shape : std::vector<int64_t>(m.shape.begin() + 1, m.shape.end());
    };
    if (differs([](const TensorMeta& m) { return m.shape.size(); }) || differs(rest)) {
      return head + "the shape after the first dimension (" + listing(shape) + ")" + and_layouts;
    }
  } else if (differs(shape)) {
    return head + "the shape (" + listing(shape) + ")" + and_layouts;
  }
  if (differs(layout)) return head + grouped + listing(layout) + ")";
  if (k == CollectiveKind::kAllreduce || k == CollectiveKind::kReduceScatter) {
    auto op = [](const TensorMeta& m) { return std::string(reduce_op_name(m.op)); };
    if (differs(op)) return head + "the reduction (" + listing(op) + ")";
    auto pre = [](const TensorMeta& m) { return m.prescale; };
    if (differs(pre)) return head + "the prescale factor (" + listing(pre) + ")";
    auto post = [](const TensorMeta& m) { return m.postscale; };
    if (differs(post)) return head + "the postscale factor (" + listing(post) + ")";
  }
  if (k == CollectiveKind::kBroadcast) {
    auto root = [](const TensorMeta& m) { return m.root; };
    if (differs(root)) return head + "the root (" + listing(root) + ")";
  }
  return "";
}

}  // namespace ringcc
