"""The names by which the engine matches the Horovod API's collectives on
the global process set across ranks: `<op>.<name>`, or `<op>.noname.<n>`
from a per-process counter for a call without a name (so unnamed calls
must be issued in the same order on every rank, as in Horovod; from a
thread other than the main one, `<op>.noname.<thread name>.<n>`, see
ringcc.thread_names). The collectives of a grouped call are named as its
first would be alone, then `<that>.1`, `<that>.2`, ..., so that a rank
calling the grouped form where its peers call the single one under the
same name meets them on the first collective and fails there (their
layouts differ), rather than wait for the stall timeout. And how errors
name a call on another process set."""

from __future__ import annotations

import itertools

from ringcc import thread_names

_names = itertools.count()


def reset_names(start: int = 0) -> None:
    """Restarts the counter of generated names (at the first init(), after
    a join, and in tests to realign ranks), and every thread's."""
    global _names
    _names = itertools.count(start)
    thread_names.restart()


def next_number() -> int:
    """Takes the counter's next number (join() realigns the ranks' counters
    on the highest)."""
    return next(_names)


def call_name(name: str | None) -> str:
    """What follows `<op>.` in a call's engine name: its name, or for a call
    without one (an empty name is no name, as in Horovod) `noname.` and the
    next number of the counter or of the calling thread."""
    if name is None or (isinstance(name, str) and not name):
        in_thread = thread_names.thread_name_part()
        return f"noname.{in_thread if in_thread is not None else next(_names)}"
    return str(name)


def engine_name(kind: str, name: str | None) -> str:
    return f"{kind}.{call_name(name)}"


def member_name(base: str | None, i: int) -> str | None:
    """The call name of the i-th collective of a grouped call whose call
    name is `base` (None: not on the global set)."""
    if base is None:
        return None
    return base if i == 0 else f"{base}.{i}"


def set_label(kind: str, name) -> str | None:
    """How the errors of a call on a process set other than the global one
    name its tensor: by the name the global set would give it, else (None)
    by its place in issue order on the set."""
    if name is None or (isinstance(name, str) and not name):
        return None
    return f"tensor '{kind}.{name}'"
