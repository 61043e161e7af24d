// Arguments from Python as the core takes them, and calls that fail on this
// rank before they reach the core.
//
// Whatever goes wrong while a call's arguments become a CollectiveArgs (a
// bad op, root, scale factor, name, tensor, output or splits, a Python
// exception from a conversion), this rank still takes part in the same
// call, as a failed participant: in issue order on the communicator for an
// unnamed call, under its name in the engine for a named one. Its peers
// then raise MismatchError naming this rank and the reason for that call,
// and the next call is in step on every rank. This rank raises its own
// error at once.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "bindings/buffer_view.h"
#include "core/collective/collective_args.h"
#include "core/communicator.h"

namespace ringcc_py {

// A collective's kind by its name ("allreduce", "reduce_scatter" or
// "reducescatter", ...), for adapters.
ringcc::CollectiveKind kind_of(const std::string& name);

// Takes part in the call as a failed participant without waiting for the
// peers: queued in issue order on `c` (name empty) or handed to the engine
// (nothing before init()).
// `layout`: the failed call's TensorMeta::layout (TensorMeta::kGroupFailed: one
// of several collectives of a grouped call this rank fails together).
void report_failed_call(ringcc::Communicator* c, ringcc::CollectiveKind kind, const std::string& why,
                        const std::string& name, int64_t layout = 0);

// Called from a catch block: takes part in the call as a failed participant
// (see above), then rethrows the error being handled.
[[noreturn]] void fail_call(ringcc::Communicator* c, ringcc::CollectiveKind kind, const std::string& name,
                            int64_t layout = 0);

// Arguments as the core takes them. Each raises the error the call then
// reports (see fail_call).

// A collective's name: None -> "" (unnamed); otherwise a non-empty str.
std::string name_of(pybind11::handle name);

// A reduction: an int code (ringcc.Sum ... Product) or a name ("sum",
// "average", ...), as ringcc._op() reads it.
ringcc::ReduceOp reduce_op_of(pybind11::handle op);

// A scale factor: anything float() takes without parsing text.
double scale_factor_of(pybind11::handle v, const char* what);

// A broadcast root: an int (range-checked by the core against the size).
int root_of(pybind11::handle v, const ringcc::Communicator& c);

// The arguments a reduction takes from Python, converted (raising the
// call's error when they cannot be).
struct Reduction {
  ringcc::ReduceOp op;
  double pre, post;
  Reduction(pybind11::handle op_obj, pybind11::handle pre_obj, pybind11::handle post_obj)
      : op(reduce_op_of(op_obj)),
        pre(scale_factor_of(pre_obj, "prescale_factor")),
        post(scale_factor_of(post_obj, "postscale_factor")) {}
};

// The arguments every collective of one tensor starts from: its kind and
// `in`'s dtype, address, count, rows, memory, device and stream.
ringcc::CollectiveArgs tensor_args(ringcc::CollectiveKind kind, const HostTensor& in);

// The arguments of an allreduce that writes its result over its input
// (the binding's fast paths, which need no Prepared).
ringcc::CollectiveArgs in_place_allreduce(const HostTensor& in, int op, double pre, double post);

// The shape of `in` for the ranks to compare; `in` stays alive (unmoved)
// until the collective completes.
void describe_shape(ringcc::CollectiveArgs& a, const HostTensor& in);

}  // namespace ringcc_py
