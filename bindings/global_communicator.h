// The communicator behind the module-level API (ringcc.init()), for other
// parts of the extension (the XLA FFI handlers) that run collectives on it.
#pragma once

#include <functional>
#include <memory>

#include "core/collective/work.h"
#include "core/communicator.h"
#include "core/engine/engine.h"
#include "core/engine/engine_waiter.h"

namespace ringcc_py {

// The initialized communicator, shared so that it outlives a concurrent
// shutdown(); raises Error(kNotInitialized) before init(). Safe to call
// without the GIL, from any thread.
std::shared_ptr<ringcc::Communicator> global_communicator();

// Starts the background engine's next cycle now (nothing before init()):
// for a caller about to block on `waiting`, a named collective's Work,
// which counts as blocked on the engine while the returned waiter lives.
// Needs the GIL.
ringcc::EngineWaiter nudge_engine(const std::shared_ptr<ringcc::Work>& waiting);

// Calls use(engine) with the background engine of ringcc.init(), which
// stays alive meanwhile (a concurrent shutdown() waits); raises
// Error(kNotInitialized) before init(). Safe without the GIL, from any
// thread; `use` must not block.
void with_engine(const std::function<void(ringcc::Engine&)>& use);

}  // namespace ringcc_py
