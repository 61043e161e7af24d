// Prepare and launch: a collective's Python arguments become a Prepared
// (arguments.h converts them), which runs now, queues in issue order
// (async), or goes to the engine by name; its result becomes a NumPy array,
// a device array or the caller's own output. Whatever the conversion
// raises fails the call on every rank (arguments.h, fail_call).
#pragma once

#include <pybind11/pybind11.h>

#include "bindings/handle.h"
#include "bindings/prepared.h"
#include "core/collective/collective_args.h"
#include "core/communicator.h"

namespace ringcc_py {

// The result of most collectives: the output array.
pybind11::object default_result(Prepared& p);

// A named collective of CUDA tensors runs when the background engine gets
// to it, fused with others, on the process's side stream for the device
// (ordered after the caller's stream now); waiting for its handle orders
// the waiting thread's stream after it. Returns the stream it runs on.
void* route_named_device(ringcc::CollectiveScalars& a);

// A handle of a device collective orders its waiter's stream (handle.h).
void note_device(HandleState& h, const ringcc::CollectiveScalars& a, pybind11::handle like);

// The collectives on communicator `c`, blocking or (async) returning a
// Handle. name: None, or a non-empty str that hands the call to the engine
// (ringcc.init()'s ranks); label: how errors name the tensor of an unnamed
// call (None: its place in issue order); layout: a named call's digest of
// the group it belongs to (TensorMeta::layout; 0: none).
pybind11::object do_allreduce(ringcc::Communicator& c, pybind11::object tensor, pybind11::object out,
                              pybind11::handle op, pybind11::handle pre, pybind11::handle post, bool inplace,
                              bool async, pybind11::handle name = pybind11::none(),
                              pybind11::handle label = pybind11::none(), int64_t layout = 0);
pybind11::object do_broadcast(ringcc::Communicator& c, pybind11::object tensor, pybind11::object out,
                              pybind11::handle root, bool inplace, bool async, pybind11::handle name = pybind11::none(),
                              pybind11::handle label = pybind11::none());
pybind11::object do_allgather(ringcc::Communicator& c, pybind11::object tensor, pybind11::object out, bool async,
                              pybind11::handle name = pybind11::none(), pybind11::handle label = pybind11::none(),
                              int64_t layout = 0);
pybind11::object do_reduce_scatter(ringcc::Communicator& c, pybind11::object tensor, pybind11::object out,
                                   pybind11::handle op, pybind11::handle pre, pybind11::handle post, bool async,
                                   pybind11::handle name = pybind11::none(), pybind11::handle label = pybind11::none(),
                                   int64_t layout = 0);
pybind11::object do_alltoall(ringcc::Communicator& c, pybind11::object tensor, pybind11::object splits,
                             pybind11::object out, bool async, pybind11::handle name = pybind11::none(),
                             pybind11::handle label = pybind11::none());
pybind11::object do_barrier(ringcc::Communicator& c, bool async);
pybind11::object do_grouped_allreduce(ringcc::Communicator& c, pybind11::handle tensors, pybind11::handle op,
                                      pybind11::handle pre, pybind11::handle post, bool inplace, bool async);

}  // namespace ringcc_py
