"""Elastic mode's blacklist: a host whose worker failed starts no new
worker, for good or for a cooldown (--blacklist-cooldown-range) that doubles
with every failure (Horovod's exponential backoff)."""

from __future__ import annotations

import random

COOLDOWN_LOWER_LIMIT_S = 1
COOLDOWN_UPPER_LIMIT_S = 3600


class HostState:
    """A host's blacklisting (Horovod's HostState): for good without a
    cooldown range, else for a cooldown that doubles with every failure."""

    def __init__(self, cooldown_range: tuple[int, int] | None) -> None:
        self._range = cooldown_range
        self.blacklisted = False
        self.count = 0
        self.until = 0.0

    def blacklist(self, now: float) -> float:
        """Blacklists the host; returns how long (inf: for good)."""
        self.blacklisted = True
        if self._range is None:
            return float("inf")
        if self.until > now:
            return self.until - now
        lower, upper = self._range
        self.count += 1
        delay = lower * (1 << self.count) + random.uniform(0, 1) * lower
        seconds = max(lower, min(upper, delay))
        self.until = now + seconds
        return seconds

    def available(self, now: float) -> bool:
        if self.blacklisted and self._range is not None and now >= self.until:
            self.blacklisted = False  # the cooldown is over
        return not self.blacklisted
