// Direct access to the reduction kernels, for tests and benchmarks:
// ringcc._core._reduce_inplace, _reduce_many and _scale_inplace. They take
// arrays (or anything view_of accepts) in host memory and run without the
// GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/buffer_view.h"
#include "bindings/interpreter_exit.h"
#include "core/base/error.h"
#include "core/collective/dtype.h"
#include "core/collective/reduce_op.h"
#include "core/collective/reduction.h"

namespace py = pybind11;

namespace {

using ringcc::DataType;
using ringcc::ErrorKind;
using ringcc::ReduceOp;
using ringcc_py::BufferView;

ReduceOp reduce_op_from_int(int op) {
  if (!ringcc::reduce_op_valid(op)) {
    ringcc::raise(ErrorKind::kInvalidArgument, "invalid reduce op ", op,
                  " (expected 0 sum, 1 average, 2 min, 3 max or 4 product)");
  }
  return static_cast<ReduceOp>(op);
}

// An operand must match dst element for element.
void check_matches(const BufferView& dst, const BufferView& operand, const std::string& what) {
  if (operand.dtype != dst.dtype) {
    throw py::type_error(what + " has dtype " + ringcc::dtype_name(operand.dtype) + " but dst has " +
                         ringcc::dtype_name(dst.dtype));
  }
  if (operand.count != dst.count) {
    ringcc::raise(ErrorKind::kInvalidArgument, what, " has ", operand.count, " elements but dst has ", dst.count);
  }
}

bool overlaps(const BufferView& a, const BufferView& b) {
  const auto* a0 = static_cast<const uint8_t*>(a.ptr);
  const auto* b0 = static_cast<const uint8_t*>(b.ptr);
  return a.bytes() > 0 && b.bytes() > 0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// The kernels read operands through restrict pointers, so an operand that
// shares memory with dst is read from a private copy, which gives the same
// result as evaluating the whole right-hand side first.
const void* detached(const BufferView& operand, std::vector<uint8_t>& storage) {
  storage.resize(operand.bytes());
  std::memcpy(storage.data(), operand.ptr, operand.bytes());
  return storage.data();
}

void reduce_inplace_py(py::handle dst_obj, py::handle src_obj, int op_value) {
  const ReduceOp op = reduce_op_from_int(op_value);
  const BufferView dst = ringcc_py::view_of(dst_obj, /*writable=*/true, "dst");
  const BufferView src = ringcc_py::view_of(src_obj, /*writable=*/false, "src");
  ringcc_py::require_host(dst, "dst");
  ringcc_py::require_host(src, "src");
  check_matches(dst, src, "src");
  std::vector<uint8_t> copy;
  const void* src_ptr = overlaps(dst, src) ? detached(src, copy) : src.ptr;
  ringcc_py::GilRelease release;
  ringcc::reduce_inplace(dst.ptr, src_ptr, dst.count, dst.dtype, op);
}

void reduce_many_py(py::handle dst_obj, py::sequence src_objs, int op_value) {
  const ReduceOp op = reduce_op_from_int(op_value);
  const BufferView dst = ringcc_py::view_of(dst_obj, /*writable=*/true, "dst");
  ringcc_py::require_host(dst, "dst");
  const size_t nsrc = src_objs.size();
  if (nsrc == 0) ringcc::raise(ErrorKind::kInvalidArgument, "srcs is empty; pass at least one source");
  if (nsrc > static_cast<size_t>(INT32_MAX)) ringcc::raise(ErrorKind::kInvalidArgument, "too many sources");

  std::vector<BufferView> srcs;
  srcs.reserve(nsrc);
  std::vector<std::vector<uint8_t>> copies(nsrc);
  std::vector<const void*> ptrs(nsrc);
  for (size_t j = 0; j < nsrc; ++j) {
    const std::string what = "srcs[" + std::to_string(j) + "]";
    srcs.push_back(ringcc_py::view_of(src_objs[j], /*writable=*/false, what.c_str()));
    ringcc_py::require_host(srcs.back(), what.c_str());
    check_matches(dst, srcs[j], what);
    // dst may be the first source itself; any other sharing needs a copy.
    const bool is_dst = j == 0 && srcs[j].ptr == dst.ptr;
    ptrs[j] = !is_dst && overlaps(dst, srcs[j]) ? detached(srcs[j], copies[j]) : srcs[j].ptr;
  }
  ringcc_py::GilRelease release;
  ringcc::reduce_many(dst.ptr, ptrs.data(), static_cast<int>(nsrc), dst.count, dst.dtype, op);
}

void scale_inplace_py(py::handle buf_obj, double factor) {
  const BufferView buf = ringcc_py::view_of(buf_obj, /*writable=*/true, "buf");
  ringcc_py::require_host(buf, "buf");
  ringcc_py::GilRelease release;
  ringcc::scale_inplace(buf.ptr, buf.count, buf.dtype, factor);
}

}  // namespace

void bind_reduction(py::module_& m) {
  m.def("_reduce_inplace", &reduce_inplace_py, py::arg("dst"), py::arg("src"), py::arg("op"),
        "dst = dst (op) src, element-wise, in place. op: 0 sum, 1 average (reduces as sum), "
        "2 min, 3 max, 4 product. dst and src: C-contiguous, same dtype and size.");
  m.def("_reduce_many", &reduce_many_py, py::arg("dst"), py::arg("srcs"), py::arg("op"),
        "dst = srcs[0] (op) srcs[1] (op) ..., element-wise; dst may be srcs[0]. 16-bit floats "
        "accumulate in float32 and round once.");
  m.def("_scale_inplace", &scale_inplace_py, py::arg("buf"), py::arg("factor"),
        "buf *= factor in place. Floats scale in their own precision (16-bit ones via float32); "
        "integers in double, truncated toward zero and saturated to the type's range.");
}
