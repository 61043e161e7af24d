"""The repository's name for the benches installed with ringcc
(adapters/ringcc/bench): `python -m bench.allreduce` from the repository's
root runs ringcc.bench.allreduce, so commands written before the benches
were installed keep working. bench_reduction_kernels.py, a pytest file for
the build tree, stays here."""

import ringcc.bench as _installed

__path__ = list(__path__) + list(_installed.__path__)
