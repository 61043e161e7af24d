"""Elastic mode's workers as the driver sees them, and the memberships
they form: each worker's rank, local and cross rank in a membership."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field


@dataclass
class Worker:
    id: str
    host: str
    slot: int
    process: subprocess.Popen
    started: float
    generation: int = 0  # the last membership it belongs to (0: none yet)
    first_generation: int = 0  # the first one
    holds_state: bool = False  # it synchronised the training state (or started the job with it)
    rank: int = -1
    waiting: bool = False  # its join waits for a reply
    waiting_since: float = 0.0
    reply: dict | None = None
    leaving: bool = False  # told to leave, or stopped by the driver: its exit is no failure
    removal: bool = False  # its slot was removed from the hosts
    exit_code: int | None = None
    announced: float = 0.0  # when its wait to be let in was last announced
    joins: int = 0  # its join requests so far: an older one still held is answered "retry"

    @property
    def alive(self) -> bool:
        return self.exit_code is None


@dataclass
class Formation:
    """A membership whose rank 0 has not chosen its store's port yet."""

    generation: int
    members: list[Worker]
    assignments: dict[str, dict] = field(default_factory=dict)


def form_membership(generation: int, chosen: list[Worker], master_addr: str) -> Formation:
    """The membership of `chosen`, in this order: the assignment each worker
    is told (rank 0 then chooses its store's port, master_port)."""
    size = len(chosen)
    local_of: dict[str, list[Worker]] = {}
    for w in chosen:
        local_of.setdefault(w.host, []).append(w)
    cross_count: dict[int, int] = {}
    for w in chosen:
        local_rank = local_of[w.host].index(w)
        cross_count[local_rank] = cross_count.get(local_rank, 0) + 1
    formation = Formation(generation, chosen)
    seen_cross: dict[int, int] = {}
    for rank, w in enumerate(chosen):
        local_rank = local_of[w.host].index(w)
        cross_rank = seen_cross.get(local_rank, 0)
        seen_cross[local_rank] = cross_rank + 1
        formation.assignments[w.id] = {
            "action": "assign",
            "generation": generation,
            "rank": rank,
            "size": size,
            "local_rank": local_rank,
            "local_size": len(local_of[w.host]),
            "cross_rank": cross_rank,
            "cross_size": cross_count[local_rank],
            "host": w.host,
            "master_addr": master_addr,
            "master_port": 0,
        }
    return formation
