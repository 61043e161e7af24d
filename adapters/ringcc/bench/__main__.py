"""python -m ringcc.bench NAME [ARGS]: runs one of ringcc's benches.

`python -m ringcc.bench allreduce ...` is `python -m ringcc.bench.allreduce ...`;
without NAME (or with --help) it lists the benches. The benches time ranks,
so most are started by a launcher: ringrun -np 2 python -m ringcc.bench allreduce.
"""

from __future__ import annotations

import importlib
import sys

# name -> what it measures (the first line of each module's docstring says more)
BENCHES = {
    "allreduce": "allreduce, allgather, broadcast: time, algbw, busbw beside gloo, MPI, NCCL (ringrun -np N)",
    "torch_allreduce": "torch.distributed with backend 'ring' against gloo (ringrun -np N)",
    "tensorflow_allreduce": "ringcc.tensorflow against TensorFlow's MultiWorkerMirroredStrategy (ringrun -np N)",
    "jax_allreduce": "ringcc.jax inside jax.jit against NumPy, mpi4jax and JAX's gloo (ringrun -np N)",
    "mxnet_pushpull": "the MXNet kvstore 'ring' against the core (ringrun -np N, MXNet's Python)",
    "engine": "the background engine: many small named allreduces (ringrun -np N)",
    "out_of_place": "named per-tensor rounds, out of place against in place (ringrun -np N)",
    "netns_bench": "allreduce across network-namespace hosts on this machine (root)",
    "tcp_bandwidth": "one-way TCP bandwidth between two hosts",
    "tcp_exchange": "the latency floor of a frame exchange between two hosts over TCP",
    "cost_model": "a cost model of the collectives across hosts, fitted to allreduce --json files",
    "plot": "the plot of a saved allreduce --json file, again",
    "gpu_trace": "summary of a RINGCC_GPU_TRACE run",
}


def usage() -> str:
    width = max(map(len, BENCHES))
    lines = [__doc__.strip().splitlines()[0], "", "benches:"]
    lines += [f"  {name:<{width}}  {what}" for name, what in BENCHES.items()]
    lines += ["", "python -m ringcc.bench NAME --help: the options of one bench"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name = argv[0].replace("-", "_")
    if name not in BENCHES:
        close = [b for b in BENCHES if name in b or b.startswith(name[:3])]
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        print(f"python -m ringcc.bench: no bench named {argv[0]!r}{hint}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__package__}.{name}")
    sys.argv = [f"python -m ringcc.bench {name}"] + argv[1:]
    return module.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
