// Unit tests of the header ranks agree on (core/collective/op_header.h):
// check_agreement() on headers made as the ranks make them, shapes that
// differ with the same element count, shapes longer than the header holds,
// ranks that give no shape, and how errors name the tensor (naming_tensor).
//
// Exits 0 when every check passes, 1 otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/collective/collective_args.h"
#include "core/collective/op_header.h"
#include "tests/cpp/expect.h"

using namespace ringcc;  // NOLINT(build/namespaces)

namespace {

// The header of rank `rank`'s collective of `kind` over a float32 tensor of
// `shape` (no shape when `with_shape` is false).
OpHeader header(CollectiveKind kind, const std::vector<int64_t>& shape, bool with_shape = true) {
  CollectiveArgs a;
  a.kind = kind;
  a.count = 1;
  for (int64_t d : shape) a.count *= d;
  a.row_elems = shape.empty() ? 1 : a.count / (shape[0] ? shape[0] : 1);
  if (with_shape) {
    a.shape = shape.data();
    a.ndim = static_cast<int32_t>(shape.size());
  }
  return make_header(a);
}

// The kind of the ringcc::Error that agreeing on `headers` raises on rank 0
// (-1: none), its message in *what.
int verdict(const std::vector<OpHeader>& headers, std::string* what = nullptr) {
  std::vector<int> ranks;
  for (size_t i = 0; i < headers.size(); ++i) ranks.push_back(static_cast<int>(i));
  std::vector<int64_t> counts;
  if (headers[0].kind == static_cast<int32_t>(CollectiveKind::kAlltoall)) {
    counts.assign(headers.size() * headers.size(), 0);
  }
  try {
    check_agreement(headers, ranks, counts, 0);
  } catch (const Error& e) {
    if (what) *what = e.what();
    return static_cast<int>(e.kind());
  }
  return -1;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const int kMismatch = static_cast<int>(ErrorKind::kMismatch);

void test_same_count_other_shape() {
  for (CollectiveKind kind : {CollectiveKind::kAllreduce, CollectiveKind::kBroadcast}) {
    std::string what;
    EXPECT(verdict({header(kind, {2, 3}), header(kind, {2, 3})}) == -1);
    EXPECT(verdict({header(kind, {2, 3}), header(kind, {3, 2})}, &what) == kMismatch);
    EXPECT(has(what, "disagree on the shape (rank 0: [2, 3], rank 1: [3, 2])"));
  }
  std::string what;
  const auto rs = CollectiveKind::kReduceScatter;
  EXPECT(verdict({header(rs, {4, 3}), header(rs, {3, 4})}, &what) == kMismatch);
  EXPECT(has(what, "rank 0: [4, 3], rank 1: [3, 4]"));
  // Counts that differ name the shapes too.
  EXPECT(verdict({header(CollectiveKind::kAllreduce, {2, 3}), header(CollectiveKind::kAllreduce, {3, 3})}, &what) ==
         kMismatch);
  EXPECT(has(what, "number of elements (rank 0: 6, rank 1: 9) and the shape (rank 0: [2, 3], rank 1: [3, 3])"));
}

void test_rows_may_differ() {
  for (CollectiveKind kind : {CollectiveKind::kAllgather, CollectiveKind::kAlltoall}) {
    std::string what;
    EXPECT(verdict({header(kind, {2, 6}), header(kind, {5, 6})}) == -1);
    EXPECT(verdict({header(kind, {2, 6}), header(kind, {2, 3, 2})}, &what) == kMismatch);
    EXPECT(has(what, "shape after the first dimension (rank 0: [2, 6], rank 1: [2, 3, 2])"));
    EXPECT(verdict({header(kind, {2, 6}), header(kind, {2, 6, 1})}) == kMismatch);
  }
}

void test_ranks_without_a_shape() {
  // A rank that gives no shape (the engine's fused batches, torch's
  // backend): only element counts are compared.
  const auto ar = CollectiveKind::kAllreduce;
  EXPECT(verdict({header(ar, {2, 3}), header(ar, {3, 2}, false)}) == -1);
  EXPECT(verdict({header(ar, {2, 3}, false), header(ar, {3, 2}, false)}) == -1);
  std::string what;
  EXPECT(verdict({header(ar, {2, 3}, false), header(ar, {7}, false)}, &what) == kMismatch);
  EXPECT(has(what, "number of elements (rank 0: 6, rank 1: 7)") && !has(what, "shape"));
}

void test_long_shapes() {
  // Past kShapeSlots dimensions the header holds a hash of the rest.
  std::vector<int64_t> a(kShapeSlots + 6, 1), b = a;
  a[kShapeSlots + 2] = 2;
  b[kShapeSlots + 3] = 2;
  const auto ar = CollectiveKind::kAllreduce;
  std::string what;
  EXPECT(verdict({header(ar, a), header(ar, a)}) == -1);
  EXPECT(verdict({header(ar, a), header(ar, b)}, &what) == kMismatch);
  EXPECT(has(what, "(26 dimensions)") && has(what, "the header holds 19 dimensions"));
  // Exactly kShapeSlots dimensions: all of them in the header, no hash.
  std::vector<int64_t> exact(kShapeSlots, 2), other = exact;
  other[0] = 4;  // as many elements
  other[kShapeSlots - 1] = 1;
  EXPECT(verdict({header(ar, exact), header(ar, exact)}) == -1);
  EXPECT(verdict({header(ar, exact), header(ar, other)}, &what) == kMismatch);
  EXPECT(has(what, "rank 1: [4, 2, 2") && has(what, ", 1]") && !has(what, "header holds"));
}

void test_fused_tensors() {
  // A grouped call's tensors fused into one allreduce carry a hash of their
  // shapes: as many elements in other shapes disagree.
  const std::vector<int64_t> a = {2, 3}, b = {3, 2}, c = {4};
  std::vector<CollectiveArgs> list(2), other(2);
  list[0].shape = c.data(), list[0].ndim = 1, list[0].count = 4;
  list[1].shape = a.data(), list[1].ndim = 2, list[1].count = 6;
  other[0] = list[0];
  other[1].shape = b.data(), other[1].ndim = 2, other[1].count = 6;
  const std::vector<size_t> order = {0, 1};
  int64_t hash_a = 0, hash_b = 0;
  const OpHeader ha = make_header(fuse_allreduces(list, order, 0, 2, &hash_a));
  const OpHeader hb = make_header(fuse_allreduces(other, order, 0, 2, &hash_b));
  EXPECT(ha.ndim == kFusedShapes && ha.count == 10 && hash_a != hash_b);
  std::string what;
  EXPECT(verdict({ha, ha}) == -1);
  EXPECT(verdict({ha, hb}, &what) == kMismatch);
  EXPECT(has(what, "shapes of the tensors fused into it") && has(what, "(rank 0: 10, rank 1: 10)"));
  EXPECT(fused_shapes_text(other, order, 0, 2) == "[4], [3, 2]");
  // A tensor without a shape: the batch carries none, counts only.
  other[1].ndim = -1;
  int64_t none = 0;
  EXPECT(make_header(fuse_allreduces(other, order, 0, 2, &none)).ndim == -1);
  EXPECT(fused_shapes_text(other, order, 0, 2) == "[4], 6 elements");
}

void test_failed_call_and_corrupt_headers() {
  // A failed call's reason travels where a shape would.
  std::vector<OpHeader> headers = {header(CollectiveKind::kAllreduce, {2, 3}),
                                   make_header(failed_call(CollectiveKind::kAllreduce, "unknown reduction 'median'"))};
  std::string what;
  EXPECT(verdict(headers, &what) == kMismatch);
  EXPECT(has(what, "rank 1 could not start allreduce: unknown reduction 'median'"));
  OpHeader bad = header(CollectiveKind::kAllreduce, {2, 3});
  bad.shape[1] = -3;
  EXPECT(verdict({header(CollectiveKind::kAllreduce, {2, 3}), bad}) == static_cast<int>(ErrorKind::kInternal));
  bad = header(CollectiveKind::kAllreduce, {2, 3});
  bad.ndim = -7;
  EXPECT(verdict({header(CollectiveKind::kAllreduce, {2, 3}), bad}) == static_cast<int>(ErrorKind::kInternal));
}

void test_naming_tensor() {
  const std::vector<int64_t> shape = {2, 3};
  CollectiveArgs a;
  a.kind = CollectiveKind::kAllreduce;
  a.count = 6;
  a.shape = shape.data();
  a.ndim = 2;
  EXPECT(naming_tensor("allreduce: ranks disagree", a, 12) ==
         "allreduce (collective #12 in issue order, shape [2, 3]): ranks disagree");
  a.label = "tensor 'grad.3'";
  EXPECT(naming_tensor("rank 1 could not start allreduce: x", a, 12) ==
         "allreduce (tensor 'grad.3', shape [2, 3]): rank 1 could not start allreduce: x");
  CollectiveArgs rows;  // no shape: its sizes
  rows.kind = CollectiveKind::kAllgather;
  rows.count = 12;
  rows.row_elems = 4;
  EXPECT(naming_tensor("allgather: x", rows, 3) ==
         "allgather (collective #3 in issue order, 12 elements in rows of 4): x");
}

}  // namespace

int main() {
  test_same_count_other_shape();
  test_rows_may_differ();
  test_ranks_without_a_shape();
  test_long_shapes();
  test_fused_tensors();
  test_failed_call_and_corrupt_headers();
  test_naming_tensor();
  std::printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
