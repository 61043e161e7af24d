// Prepare and launch (launch.h).
#include "bindings/launch.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bindings/arguments.h"
#include "bindings/buffer_view.h"
#include "bindings/device_arrays.h"
#include "bindings/errors.h"
#include "bindings/interpreter_exit.h"
#include "bindings/runtime.h"
#include "core/base/error.h"

namespace py = pybind11;
using ringcc::CollectiveArgs;
using ringcc::CollectiveKind;
using ringcc::ErrorKind;

namespace ringcc_py {

py::object default_result(Prepared& p) { return p.out; }

// A named collective of CUDA tensors runs when the background engine gets
// to it, fused with others, on the process's side stream for the device
// (ordered after the caller's stream now); waiting for its handle orders
// the waiting thread's stream after it. Returns the stream it runs on.
void* route_named_device(ringcc::CollectiveScalars& a) {
  if (a.memory == ringcc::MemoryKind::kHost) return nullptr;
  a.stream = side_stream_after(a.device, a.stream);
  return a.stream;
}

// A handle of a device collective orders its waiter's stream (handle.h).
void note_device(HandleState& h, const ringcc::CollectiveScalars& a, py::handle like) {
  if (a.memory == ringcc::MemoryKind::kHost) return;
  h.device = a.device;
  h.stream = a.stream;
  h.device_like = py::reinterpret_borrow<py::object>(like);
}

namespace {

// The caller's `out` (viewed as v) as the output of `a`, whose input is
// `in`: of the input's dtype and, where count >= 0, of count elements.
void use_out(const BufferView& v, const BufferView& in, int64_t count, CollectiveArgs& a) {
  if (v.dtype != in.dtype) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out has dtype ", ringcc::dtype_name(v.dtype), " but the input has ",
                  ringcc::dtype_name(in.dtype));
  }
  if (count >= 0 && v.count != count) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out holds ", v.count, " elements but ", count, " are needed");
  }
  a.out = v.ptr;
  a.out_count = v.count;
}

// output_for() of a CUDA input: `out` on the same device, or a new device
// array (bindings/device_arrays.h).
py::object device_output_for(const py::object& out, const BufferView& in, const std::vector<int64_t>& shape,
                             int64_t count, CollectiveArgs& a) {
  if (out.is_none()) {
    py::object arr = new_device_array(in.origin, shape, in.dtype, in.device, in.stream);
    BufferView v = view_of(arr, true, "out");
    a.out = v.ptr;
    a.out_count = count;
    return arr;
  }
  BufferView v = view_of(out, true, "out");
  if (v.memory != in.memory || v.device != in.device) {
    ringcc::raise(ErrorKind::kInvalidArgument, "out is in ", ringcc::memory_kind_name(v.memory),
                  v.device >= 0 ? " (cuda:" + std::to_string(v.device) + ")" : std::string(), " but the input is in ",
                  ringcc::memory_kind_name(in.memory), " (cuda:", in.device, ")");
  }
  use_out(v, in, count, a);
  return out;
}

// Output for an out-of-place call: the caller's `out`, checked, or a new
// array shaped like `like`.
py::object output_for(const py::object& out, const BufferView& in, const std::vector<int64_t>& shape, int64_t count,
                      CollectiveArgs& a) {
  if (in.memory != ringcc::MemoryKind::kHost) return device_output_for(out, in, shape, count, a);
  if (out.is_none()) {
    py::array arr = new_array(in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype, shape);
    a.out = arr.mutable_data();
    a.out_count = count;
    return arr;
  }
  BufferView v = view_of(out, true, "out");
  use_out(v, in, count, a);
  return out;
}

// An allocator for outputs whose size is known only after the header
// exchange: it takes the GIL to create the NumPy array.
void allocate_late(Prepared& p, const BufferView& in) {
  std::vector<int64_t> row_shape(in.shape.size() > 1 ? in.shape.begin() + 1 : in.shape.end(), in.shape.end());
  const int64_t row_elems = in.row_elems();
  auto* self = &p;
  if (in.memory != ringcc::MemoryKind::kHost) {
    // A device array of the input's library; `like` stays alive in keep.
    p.keep.push_back(in.origin);
    py::handle like = in.origin;
    const ringcc::DataType dtype = in.dtype;
    const int device = in.device;
    void* stream = in.stream;
    p.args.allocate = [self, like, dtype, device, stream, row_shape, row_elems](int64_t elements) -> void* {
      GilForCall gil;
      std::vector<int64_t> shape{elements / row_elems};
      shape.insert(shape.end(), row_shape.begin(), row_shape.end());
      py::object arr = new_device_array(like, shape, dtype, device, stream);
      BufferView v = view_of(arr, true, "out");
      self->out = arr;
      return v.ptr;
    };
    return;
  }
  py::object dtype = in.numpy_dtype.is_none() ? numpy_dtype_for(in.dtype) : in.numpy_dtype;
  // The Prepared keeps the dtype alive while the collective may call this
  // (its handle outlives the collective); the allocator holds no Python
  // reference of its own, so it may be destroyed on any thread, without
  // the GIL (the core drops its copy of the arguments where it likes).
  p.keep.push_back(dtype);
  py::handle dtype_handle = dtype;
  p.args.allocate = [self, dtype_handle, row_shape, row_elems](int64_t elements) -> void* {
    GilForCall gil;
    std::vector<int64_t> shape{elements / row_elems};
    shape.insert(shape.end(), row_shape.begin(), row_shape.end());
    py::array arr = new_array(py::reinterpret_borrow<py::object>(dtype_handle), shape);
    self->out = arr;
    return arr.mutable_data();
  };
}

void fill_input(Prepared& p, const BufferView& in) {
  p.shape = in.shape;
  p.args.shape = p.shape.data();
  p.args.ndim = static_cast<int32_t>(p.shape.size());
  p.args.dtype = in.dtype;
  p.args.in = in.ptr;
  p.args.count = in.count;
  p.args.row_elems = in.row_elems();
  p.args.memory = in.memory;
  p.args.device = in.device;
  p.args.stream = in.stream;
  p.keep.push_back(in.owner);
  if (in.memory != ringcc::MemoryKind::kHost) p.device_like = in.origin;
}

// Input and output of a collective whose result has the input's shape
// (allreduce, broadcast): in place, into `out`, or into a new array.
void same_shape_output(Prepared& p, py::object tensor, py::object out, bool inplace) {
  BufferView in = view_of(tensor, inplace, "tensor");
  fill_input(p, in);
  if (inplace) {
    p.args.out = in.ptr;
    p.args.out_count = in.count;
    p.out = tensor;
  } else {
    p.out = output_for(out, in, in.shape, in.count, p.args);
  }
  p.keep.push_back(p.out);
  p.result = default_result;
}

std::unique_ptr<Prepared> prep_allreduce(py::object tensor, py::object out, const Reduction& r, bool inplace) {
  auto p = std::make_unique<Prepared>();
  p->args.kind = CollectiveKind::kAllreduce;
  p->args.op = r.op;
  p->args.prescale = r.pre;
  p->args.postscale = r.post;
  same_shape_output(*p, tensor, out, inplace);
  return p;
}

// What error messages call the tensor (CollectiveScalars::label): None
// (its place in issue order) or a str, which p keeps alive.
void set_label(Prepared& p, py::handle label) {
  if (label.is_none()) return;
  if (!PyUnicode_Check(label.ptr())) {
    throw py::type_error("label must be a str or None, got " + std::string(py::repr(label)));
  }
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(label.ptr(), &n);
  if (!text) throw py::error_already_set();
  p.keep.push_back(py::reinterpret_borrow<py::object>(label));
  p.args.label = std::string_view(text, static_cast<size_t>(n));
}

// The shape and label of a prepared collective as communicator `c` takes
// them: no shape where its ranks compare element counts only.
void finish_description(ringcc::Communicator& c, Prepared& p, py::handle label) {
  if (!c.compares_shapes()) p.args.ndim = -1;
  set_label(p, label);
}

// Runs a collective now, queues it in issue order (async), or hands it to
// the engine by name (async with a name). make() converts the arguments;
// whatever it raises, and a name or label that is not one, fails the call
// on every rank (see fail_call). `label`: how errors name the tensor of an
// unnamed call (None: its place in issue order); `layout`: a named call's
// TensorMeta::layout (a digest of the group it belongs to; 0: none).
template <class Make>  // () -> std::unique_ptr<Prepared>
py::object launch(ringcc::Communicator& c, CollectiveKind kind, Make&& make, bool async,
                  py::handle name_obj = py::none(), py::handle label = py::none(), int64_t layout = 0) {
  std::unique_ptr<Prepared> p;
  std::string name;
  try {
    name = name_of(name_obj);
    if (!name.empty()) engine();  // raises before init()
    p = make();
    finish_description(c, *p, label);
    if (!name.empty()) route_named_device(p->args);
  } catch (...) {
    fail_call(&c, kind, name, layout);
  }
  if (!name.empty()) {
    HandleState h;
    note_device(h, p->args, p->device_like);
    // The Prepared keeps only what the result needs; the engine owns the args.
    h.work = engine().enqueue(name, std::move(p->args), p->shape.data(), p->shape.size(), layout);
    h.preps.push_back(std::move(p));
    h.named = true;
    return make_handle(std::move(h));
  }
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      GilRelease release;
      work = c.submit(p->args);
    }
    // The allocator points at the Prepared that the handle now owns.
    HandleState h;
    note_device(h, p->args, p->device_like);
    h.work = std::move(work);
    h.preps.push_back(std::move(p));
    return make_handle(std::move(h));
  }
  {
    BlockingCall call;
    c.run(p->args);
  }
  return p->result(*p);
}

// Rows for each rank from `splits` (any iterable of ints, as int() reads
// them), in elements of `row`.
std::vector<int64_t> send_counts_of(py::handle splits, int64_t row) {
  std::vector<int64_t> counts;
  for (auto s : py::iter(splits)) {
    py::int_ rows(py::reinterpret_borrow<py::object>(s));  // int(s)
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(rows.ptr(), &overflow);
    if (overflow ||
        (row > 0 && (v > std::numeric_limits<int64_t>::max() / row || v < std::numeric_limits<int64_t>::min() / row))) {
      ringcc::raise(ErrorKind::kInvalidArgument, "alltoall: split ", std::string(py::str(rows)), " is out of range");
    }
    counts.push_back(static_cast<int64_t>(v) * row);
  }
  return counts;
}

}  // namespace

py::object do_allreduce(ringcc::Communicator& c, py::object tensor, py::object out, py::handle op, py::handle pre,
                        py::handle post, bool inplace, bool async, py::handle name, py::handle label,
                        int64_t layout) {
  return launch(
      c, CollectiveKind::kAllreduce, [&] { return prep_allreduce(tensor, out, Reduction(op, pre, post), inplace); },
      async, name, label, layout);
}

py::object do_broadcast(ringcc::Communicator& c, py::object tensor, py::object out, py::handle root, bool inplace,
                        bool async, py::handle name, py::handle label) {
  return launch(
      c, CollectiveKind::kBroadcast,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kBroadcast;
        p->args.root = root_of(root, c);
        same_shape_output(*p, tensor, out, inplace);
        return p;
      },
      async, name, label);
}

py::object do_allgather(ringcc::Communicator& c, py::object tensor, py::object out, bool async, py::handle name,
                        py::handle label, int64_t layout) {
  return launch(
      c, CollectiveKind::kAllgather,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kAllgather;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        if (out.is_none()) {
          allocate_late(*p, in);
        } else {
          output_for(out, in, {}, -1, p->args);
          p->out = out;
          p->keep.push_back(out);
        }
        p->result = default_result;
        return p;
      },
      async, name, label, layout);
}

py::object do_reduce_scatter(ringcc::Communicator& c, py::object tensor, py::object out, py::handle op, py::handle pre,
                             py::handle post, bool async, py::handle name, py::handle label, int64_t layout) {
  return launch(
      c, CollectiveKind::kReduceScatter,
      [&] {
        const Reduction r(op, pre, post);
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kReduceScatter;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        p->args.op = r.op;
        p->args.prescale = r.pre;
        p->args.postscale = r.post;
        std::vector<int64_t> shape = in.shape;
        shape[0] = ringcc::block_rows(in.rows(), c.size(), c.rank());
        p->out = output_for(out, in, shape, shape[0] * in.row_elems(), p->args);
        p->keep.push_back(p->out);
        p->result = default_result;
        return p;
      },
      async, name, label, layout);
}

py::object do_alltoall(ringcc::Communicator& c, py::object tensor, py::object splits, py::object out, bool async,
                       py::handle name, py::handle label) {
  return launch(
      c, CollectiveKind::kAlltoall,
      [&] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kAlltoall;
        BufferView in = view_of(tensor, false, "tensor");
        if (in.shape.empty()) in.shape = {1};
        fill_input(*p, in);
        const int n = c.size();
        const int64_t row = in.row_elems();
        if (splits.is_none()) {
          if (in.rows() % n != 0) {
            ringcc::raise(ErrorKind::kInvalidArgument, "alltoall: the first dimension (", in.rows(),
                          ") does not divide evenly over ", n, " ranks; pass splits");
          }
          p->args.send_counts.assign(static_cast<size_t>(n), in.rows() / n * row);
        } else {
          p->args.send_counts = send_counts_of(splits, row);
        }
        if (out.is_none()) {
          allocate_late(*p, in);
        } else {
          output_for(out, in, {}, -1, p->args);
          p->out = out;
          p->keep.push_back(out);
        }
        p->result = [row](Prepared& q) -> py::object {
          py::list received;
          for (int64_t k : q.args.recv_counts) received.append(k / row);
          return py::make_tuple(q.out, received);
        };
        return p;
      },
      async, name, label);
}

py::object do_barrier(ringcc::Communicator& c, bool async) {
  return launch(
      c, CollectiveKind::kBarrier,
      [] {
        auto p = std::make_unique<Prepared>();
        p->args.kind = CollectiveKind::kBarrier;
        p->result = [](Prepared&) { return py::object(py::none()); };
        return p;
      },
      async);
}

py::object do_grouped_allreduce(ringcc::Communicator& c, py::handle tensors, py::handle op, py::handle pre,
                                py::handle post, bool inplace, bool async) {
  std::vector<std::unique_ptr<Prepared>> preps;
  try {
    const Reduction r(op, pre, post);
    for (auto t : py::iter(tensors)) {
      preps.push_back(prep_allreduce(py::reinterpret_borrow<py::object>(t), py::none(), r, inplace));
    }
  } catch (...) {
    fail_call(&c, CollectiveKind::kAllreduce, "");
  }
  for (auto& p : preps) finish_description(c, *p, py::none());
  std::vector<CollectiveArgs> list;
  list.reserve(preps.size());
  for (auto& p : preps) list.push_back(p->args);
  if (async) {
    std::shared_ptr<ringcc::Work> work;
    {
      GilRelease release;
      work = c.submit_grouped(std::move(list));
    }
    HandleState h;
    if (!preps.empty()) note_device(h, preps[0]->args, preps[0]->device_like);
    h.work = std::move(work);
    h.preps = std::move(preps);
    h.grouped = true;
    return make_handle(std::move(h));
  }
  {
    BlockingCall call;
    c.grouped_allreduce(list);
  }
  py::list outs;
  for (auto& p : preps) outs.append(p->out);
  return outs;
}

}  // namespace ringcc_py
