"""The names of unnamed collectives called from threads other than the
main one.

The engine pairs collectives across ranks by name, and an unnamed call
takes a name from a counter in issue order. Two threads of a rank that
call at once interleave differently on every rank, so a shared counter
would pair one thread's call with another thread's on a peer and return
its result without an error when the shapes agree. A call from a thread
other than the main one is therefore named by that thread's name and a
counter of its own: threads named alike on every rank (created in the
same order, or named by the program) pair their calls with each other,
and threads that are not fail at the collective's timeout, naming the
call, rather than exchange data with the wrong one.
"""

from __future__ import annotations

import itertools
import threading

_local = threading.local()
_generation = 0


def restart() -> None:
    """Every thread's counter starts again at its next call (a new job)."""
    global _generation
    _generation += 1


def thread_name_part() -> str | None:
    """`<thread name>.<n>` for this thread's next unnamed call, or None on
    the main thread (whose calls keep their adapter's own counter)."""
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return None
    counter = getattr(_local, "counter", None)
    if counter is None or getattr(_local, "generation", None) != _generation:
        counter = _local.counter = itertools.count()
        _local.generation = _generation
    return f"{thread.name}.{next(counter)}"
