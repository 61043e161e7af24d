"""What ringrun says about an option it does not know: the closest option it
does know (difflib), or the RINGCC_* variable that sets what the option seems
to be after, rather than a bare "unrecognized arguments".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# The settings the ranks read (README.md, "Settings"), for options named after them.
SETTING_VARIABLES = (
    "RINGCC_TIMEOUT_S",
    "RINGCC_FUSION_THRESHOLD",
    "RINGCC_CYCLE_TIME_MS",
    "RINGCC_CACHE_CAPACITY",
    "RINGCC_STALL_CHECK_S",
    "RINGCC_STALL_SHUTDOWN_S",
    "RINGCC_TIMELINE",
    "RINGCC_TRANSPORT",
    "RINGCC_MPI_LIB",
    "RINGCC_MPI_ALGORITHM",
    "RINGCC_MPI_RING_BYTES",
    "RINGCC_MPI_INLINE_BYTES",
    "RINGCC_MPI_SPIN_US",
    "RINGCC_MPI_PLUGIN",
    "RINGCC_INLINE_BYTES",
    "RINGCC_HIERARCHICAL_ALLREDUCE",
    "RINGCC_LOG_LEVEL",
    "RINGCC_TCP_SOCKETS",
    "RINGCC_TCP_STRIPE_BYTES",
    "RINGCC_TCP_ONE_WAY_BYTES",
    "RINGCC_TCP_BUFFER_BYTES",
    "RINGCC_TCP_CONGESTION",
    "RINGCC_CHUNK_BYTES",
    "RINGCC_SHM_AREA_BYTES",
    "RINGCC_SHM_SMALL_BYTES",
    "RINGCC_SHM_ALLREDUCE_PIECE_BYTES",
    "RINGCC_SHM_STORES",
    "RINGCC_SHM_CMA",
    "RINGCC_SPIN_US",
    "RINGCC_WAIT_POLICY",
    "RINGCC_MOVE_OFF_PEER_CPU",
    "RINGCC_NCCL_LIB",
    "RINGCC_CUDA_LIB",
    "RINGCC_NVRTC_LIB",
    "RINGCC_GPU_BACKEND",
    "RINGCC_SECRET_FILE",
    "RINGCC_INSECURE",
    "RINGCC_SOCKET_FAMILY",
    "RINGCC_ADVERTISE_ADDR",
    "RINGCC_LISTEN_ADDR",
)


def _closest(word: str, candidates: Iterable[str], cutoff: float) -> tuple[float, str | None]:
    scored = [(difflib.SequenceMatcher(None, word, candidate).ratio(), candidate) for candidate in candidates]
    best = max(scored, default=(0.0, None))
    return best if best[0] >= cutoff else (0.0, None)


def unknown_option_message(word: str, known_options: Iterable[str]) -> str:
    """One line about an unknown option: the closest known option and/or the variable to set, the better first."""
    name = word.split("=", 1)[0]
    option_score, option = _closest(name, set(known_options), 0.6)
    stem = name.lstrip("-").upper().replace("-", "_")  # compared without RINGCC_, as the option is
    variable_score, stem_match = _closest(stem, [v.removeprefix("RINGCC_") for v in SETTING_VARIABLES], 0.75)
    variable = f"RINGCC_{stem_match}" if stem_match else None
    option_hint = f"did you mean {option}?"
    variable_hint = f"ringcc reads that setting from {variable}: pass -x {variable}=VALUE"
    if option and variable:  # both when both are close; else the closer one
        if option_score >= variable_score:
            hints = [option_hint] + ([variable_hint] if variable_score >= 0.85 else [])
        else:
            hints = [variable_hint] + ([option_hint] if option_score >= 0.85 else [])
    elif option or variable:
        hints = [option_hint if option else variable_hint]
    else:
        hints = ["see ringrun --help, or README.md's settings (RINGCC_* variables, passed with -x NAME=VALUE)"]
    return f"unknown option {name}: {'; '.join(hints)}"
