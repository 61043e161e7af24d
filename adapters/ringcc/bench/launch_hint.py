"""What a bench says when no launcher started it.

A bench run as a plain `python -m ringcc.bench allreduce` is one process:
ringcc's job is that process alone, every collective a copy, so the table
would quietly time one rank. The benches say so on stderr, with the
command that starts ranks; those that cannot run alone (torch's env://
rendezvous) stop with it."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence

# The launchers' rank variables, as ringcc's core reads them
# (core/rendezvous/rendezvous.cc): ringrun, Open MPI, PMI/PMIx, SLURM, torchrun.
RANK_VARIABLES = ("RINGCC_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK")


def started_alone(environ: Mapping[str, str] | None = None) -> bool:
    """True when no launcher's rank variable is set: a job of this process alone."""
    environ = os.environ if environ is None else environ
    return not any(environ.get(v) for v in RANK_VARIABLES)


def alone_hint(bench: str, argv: Sequence[str], stops: bool = False) -> str:
    """The lines that say what happens alone, and how to launch ranks."""
    args = shlex.join(argv)
    command = f"ringrun -np 2 python -m ringcc.bench {bench}" + (f" {args}" if args else "")
    what = "it needs ranks started by a launcher" if stops else "it times one rank alone, and no peer"
    return (
        f"ringcc.bench {bench}: no launcher started this process, so {what}.\n"
        f"ringcc.bench {bench}: to time 2 ranks on this host: {command}\n"
        f"ringcc.bench {bench}: (or torchrun --nproc-per-node 2, mpirun -np 2, srun -n 2 with the same python command)"
    )


def warn_if_alone(bench: str, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Writes alone_hint to stderr when started alone; True when it did."""
    if not started_alone(environ):
        return False
    print(alone_hint(bench, sys.argv[1:] if argv is None else argv), file=sys.stderr, flush=True)
    return True
