"""torch's env:// rendezvous under srun, with nothing set by hand.

`init_process_group(backend="ring")` without an init_method reads RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, none of which srun sets. Where
SLURM names the task (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID) and the
user set neither MASTER_ADDR nor MASTER_PORT, the handler installed here
takes the rank and size from SLURM and makes torch's store itself: on the
first node of the step, on the first free port of those derived from the
job and step ids (ringcc.slurm.store_ports, salt "torch"; ringcc's own store
uses others), which the other tasks look for in turn, checking that the
store there names their step. Elsewhere torch's own handler runs unchanged.

torch's store is unauthenticated (as under torchrun); the ring backend
never puts its secret there (docs/api.md, "Security").
"""

from __future__ import annotations

import datetime
import importlib
import os
import time
from collections.abc import Mapping

from ringcc import slurm

_STEP_KEY = "ringcc/slurm-step"
_installed = False


def applies(environ: Mapping[str, str]) -> bool:
    """Whether the env:// handler fills in from SLURM: a task of srun whose
    user set no store address of torch's."""
    return (
        bool(environ.get("SLURM_PROCID"))
        and bool(environ.get("SLURM_NTASKS"))
        and bool(environ.get("SLURM_JOB_ID"))
        and "MASTER_ADDR" not in environ
        and "MASTER_PORT" not in environ
    )


def _connect(host: str, ports: list[int], identity: str, world_size: int, timeout: datetime.timedelta):
    """A client of the store on the first port whose store names our step."""
    import torch.distributed as dist  # noqa: PLC0415 - only under torch

    deadline = time.monotonic() + timeout.total_seconds()
    last = ""
    while time.monotonic() < deadline:
        for port in ports:
            try:
                store = dist.TCPStore(
                    host, port, world_size, is_master=False, timeout=datetime.timedelta(seconds=1), use_libuv=True
                )
                store.set_timeout(datetime.timedelta(seconds=max(0.1, min(5.0, deadline - time.monotonic()))))
                theirs = store.get(_STEP_KEY).decode(errors="replace")
                if theirs == identity:
                    store.set_timeout(timeout)
                    return store
                last = f"{port} serves another step, {theirs[:80]!r}"
            except (RuntimeError, ValueError) as error:  # refused, timed out, not a store of torch's
                last = f"{port}: {error}".splitlines()[0][:300]
        time.sleep(0.05)
    raise RuntimeError(
        f"env:// rendezvous under SLURM ({identity}): no store of this step found at {host} on ports "
        f"{', '.join(map(str, ports))} within {timeout.total_seconds():g} s (last: {last}); "
        "set MASTER_ADDR and MASTER_PORT to choose one"
    )


def _serve(ports: list[int], identity: str, world_size: int, timeout: datetime.timedelta):
    """Rank 0's store, on the first of `ports` it can bind."""
    import torch.distributed as dist  # noqa: PLC0415 - only under torch

    tried = []
    for port in ports:
        try:
            store = dist.TCPStore(
                "127.0.0.1", port, world_size, is_master=True, timeout=timeout, wait_for_workers=False, use_libuv=True
            )
        except (RuntimeError, OSError) as error:
            tried.append(f"{port}: {str(error).splitlines()[0][:200]}")
            continue
        store.set(_STEP_KEY, identity)
        return store
    raise RuntimeError(
        f"env:// rendezvous under SLURM ({identity}): rank 0 cannot serve torch's store on any of the ports "
        f"derived from the step ({'; '.join(tried)}); set MASTER_ADDR and MASTER_PORT to a free port"
    )


def store_for_step(environ: Mapping[str, str], rank: int, world_size: int, timeout: datetime.timedelta):
    """torch's store for this step: rank 0 serves it, the others find it."""
    identity = slurm.step_identity(environ)
    ports = slurm.store_ports(identity, "torch")
    nodes = slurm.step_nodes(environ)
    single_node = environ.get("SLURM_STEP_NUM_NODES", environ.get("SLURM_NNODES", "")) == "1"
    host = "127.0.0.1" if single_node else nodes[0]
    if rank == 0:
        return _serve(ports, identity, world_size, timeout)
    return _connect(host, ports, identity, world_size, timeout)


def _query(url: str) -> dict[str, str]:
    from urllib.parse import parse_qsl, urlparse  # noqa: PLC0415

    return dict(parse_qsl(urlparse(url).query))


def install() -> None:
    """Wraps torch's env:// handler (once): under srun, as described above."""
    global _installed
    if _installed:
        return
    # The module: torch.distributed's own `rendezvous` is its function.
    torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")
    handlers = getattr(torch_rendezvous, "_rendezvous_handlers", None)
    original = handlers.get("env") if isinstance(handlers, dict) else None
    if original is None:
        return

    def env_handler(url: str, timeout: datetime.timedelta = datetime.timedelta(minutes=30), **kwargs):
        if not applies(os.environ):
            yield from original(url, timeout=timeout, **kwargs)
            return
        query = _query(url)
        rank = int(query.get("rank", os.environ["SLURM_PROCID"]))
        world_size = int(query.get("world_size", os.environ["SLURM_NTASKS"]))
        yield (store_for_step(os.environ, rank, world_size, timeout), rank, world_size)
        raise RuntimeError("Unable to perform re-rendezvous using env:// method")

    env_handler.ringcc_original = original  # type: ignore[attr-defined]
    handlers["env"] = env_handler
    _installed = True
