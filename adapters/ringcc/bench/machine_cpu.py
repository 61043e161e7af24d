"""How busy this machine's CPUs were: the bench's account of CPU time.

Network-namespace "hosts" share one machine's CPUs, and every byte between
them costs CPU time on both sides (copies into and out of the kernel, the
stack's work between them), so the CPUs can run out before the link does.
The benches read the machine-wide counters around what they time, whatever
process or namespace did the work (the kernel's softirq time included).
"""

from __future__ import annotations

import os

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_seconds() -> float | None:
    """CPU seconds all of the machine's CPUs have spent busy since boot:
    user, nice, system, irq and softirq time (not idle, I/O wait or time
    stolen by a hypervisor); None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 8 or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / _CLOCK_TICKS


def cpus_busy(busy_before: float | None, busy_after: float | None, seconds: float) -> float | None:
    """How many CPUs were busy on average over `seconds` between two
    busy_seconds() readings; None where either reading is missing. The
    counters move in ticks (10 ms), so over a span of a few of them or less
    a reading is mostly where the ticks fell: a tick within a 30 us loop
    would read as hundreds of CPUs. Held to what the machine has."""
    if busy_before is None or busy_after is None or seconds <= 0:
        return None
    cpus = float(os.cpu_count() or 1)
    return min(max((busy_after - busy_before) / seconds, 0.0), cpus)
