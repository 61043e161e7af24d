"""ringcc.init() under torchrun: the port of ringcc's store.

torchrun gives its workers MASTER_ADDR and MASTER_PORT, where its agent
serves torch's store. ringcc's rank 0 serves a store of its own, and the
port next to MASTER_PORT is often taken: the kernel hands out ephemeral
ports in sequence, so the connection made right after the agent chose
MASTER_PORT tends to hold MASTER_PORT+1. Where the agent's store is there
for the workers (TORCHELASTIC_USE_AGENT_STORE), rank 0 takes a free port and
publishes it there, under a key of this restart attempt and this process's
n-th init(); the other ranks read it. Elsewhere ringcc uses MASTER_PORT+1.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator

from ringcc.free_ports import free_port

PORT_VARIABLE = "RINGCC_MASTER_PORT"
_inits = 0


def _applies() -> bool:
    env = os.environ
    return (
        PORT_VARIABLE not in env
        and "TORCHELASTIC_RUN_ID" in env
        and "MASTER_PORT" in env
        and "MASTER_ADDR" in env
        and "RANK" in env
        and env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        and not env.get("RINGCC_ELASTIC_DRIVER")
    )


def _timeout_s() -> float:
    try:
        return float(os.environ.get("RINGCC_TIMEOUT_S") or os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS") or 60)
    except ValueError:
        return 60.0


def _agreed_port() -> int:
    global _inits
    import torch.distributed as dist  # torchrun is torch's: torch is there

    env = os.environ
    _inits += 1
    key = f"ringcc/store_port/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/{_inits}"
    store = dist.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False, timeout=datetime.timedelta(seconds=_timeout_s())
    )
    if int(env["RANK"]) == 0:
        store.set(key, str(free_port()))
    return int(store.get(key))


@contextlib.contextmanager
def store_port() -> Iterator[None]:
    """Within the block, RINGCC_MASTER_PORT names the port every rank agreed
    on through torchrun's store (nothing changes outside torchrun)."""
    if not _applies():
        yield
        return
    os.environ[PORT_VARIABLE] = str(_agreed_port())
    try:
        yield
    finally:
        os.environ.pop(PORT_VARIABLE, None)
