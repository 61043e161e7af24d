"""What RayExecutor raises when ranks fail, naming each rank and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class RankFailedError(RuntimeError):
    """One or more ranks of a RayExecutor job failed in run(), execute() or
    execute_single(): a function raised there, or its worker died.

    `rank`: the first rank seen to fail; `failures`: {rank: what happened};
    `unfinished`: ranks that had not finished `timeout_s` after the first
    failure (run() stopped waiting for them); `died`: ranks whose worker
    is gone (the job cannot run again: shutdown() and start())."""

    def __init__(
        self,
        call: str,
        size: int,
        failures: Mapping[int, str],
        unfinished: Sequence[int] = (),
        died: Sequence[int] = (),
        timeout_s: float = 0.0,
    ) -> None:
        self.failures = dict(failures)
        self.rank = next(iter(self.failures))
        self.unfinished = list(unfinished)
        self.died = list(died)
        lines = [f"RayExecutor.{call}: rank {self.rank} of {size} {self.failures[self.rank]}"]
        lines += [f"  rank {rank} of {size} {what}" for rank, what in self.failures.items() if rank != self.rank]
        if self.unfinished:
            ranks = ", ".join(str(rank) for rank in self.unfinished)
            lines.append(f"  rank(s) {ranks} had not finished {timeout_s:g} s (timeout_s) after the first failure")
        if self.died:
            lines.append("  the job lost a worker: call shutdown() and start() again")
        super().__init__("\n".join(lines))
