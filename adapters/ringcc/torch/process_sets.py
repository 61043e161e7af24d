"""Process sets of `ringcc.torch`'s Horovod API: ringcc.process_sets, which
every Horovod-style API of ringcc shares (one registry per process)."""

from ringcc.process_sets import (  # noqa: F401  (re-exported)
    ProcessSet,
    _on_init,
    _on_shutdown,
    add_process_set,
    global_process_set,
    process_sets,
    remove_process_set,
)

__all__ = ["ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "process_sets"]
