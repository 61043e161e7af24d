"""Process sets of `ringcc.tensorflow`: ringcc.process_sets, which every
Horovod-style API of ringcc shares (one registry per process), and the two
questions the collectives ask of a set."""

from __future__ import annotations

from ringcc.process_sets import (  # noqa: F401  (re-exported)
    ProcessSet,
    _on_init,
    _on_shutdown,
    add_process_set,
    global_process_set,
    remove_process_set,
)


def is_global(process_set) -> bool:
    """Whether `process_set` is the job itself (None stands for it too)."""
    return process_set is None or process_set is global_process_set or process_set.process_set_id == 0


def root_in_set(process_set, root_rank: int) -> int:
    """The place in `process_set` of the global rank `root_rank`."""
    if root_rank not in process_set.ranks:
        raise ValueError(f"root_rank {root_rank} is not in {process_set}")
    return process_set.ranks.index(root_rank)
