"""A worker's side of ringrun's elastic mode.

ringrun's elastic driver starts each worker with RINGCC_ELASTIC_DRIVER
(where the driver listens), RINGCC_ELASTIC_WORKER (the worker's id) and the
job secret. ringcc.init() then asks the driver which rank, size and store
this worker has in the next membership (join), sets them in the environment
(RINGCC_RANK, RINGCC_SIZE, ... and the Horovod and torch names), and joins
that job. A worker that the driver no longer wants (its host was removed,
the job is over) exits; a membership that fell apart before it met is
asked for again.

A thread (watch) asks the driver for changes of the hosts and hands them to
ringcc.elastic's notification manager, which State.check_host_updates()
reads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from ringcc.elastic import protocol
from ringcc.free_ports import free_port

DRIVER_VARIABLE = "RINGCC_ELASTIC_DRIVER"
WORKER_VARIABLE = "RINGCC_ELASTIC_WORKER"
TIMEOUT_VARIABLES = ("RINGCC_ELASTIC_TIMEOUT_S", "HOROVOD_ELASTIC_TIMEOUT")
DEFAULT_ELASTIC_TIMEOUT_S = 600.0
WATCH_POLL_S = 30.0  # how long the driver holds a watch before it answers "nothing new"
RESEND_PAUSES_S = (0.05, 0.2, 0.5, 1.0)

log = logging.getLogger("ringcc.elastic")

_lock = threading.Lock()
_generation = 0  # the last membership this process joined (0: none yet)
_watch_thread: threading.Thread | None = None
_synced = False  # the driver knows this worker holds the training state


def active() -> bool:
    """True in a worker that ringrun's elastic driver started."""
    return bool(os.environ.get(DRIVER_VARIABLE))


def elastic_timeout_s() -> float:
    for name in TIMEOUT_VARIABLES:
        value = os.environ.get(name)
        if value:
            try:
                return float(value)
            except ValueError:
                pass
    return DEFAULT_ELASTIC_TIMEOUT_S


def _driver():
    address, _, port = os.environ[DRIVER_VARIABLE].rpartition(":")
    secret = os.environ.get("RINGCC_SECRET", "")
    if not secret:
        raise RuntimeError(
            f"{DRIVER_VARIABLE} is set but RINGCC_SECRET is not: the worker cannot prove "
            "itself to ringrun's elastic driver"
        )
    return address.strip("[]"), int(port), secret.encode()


def call(body: dict, timeout: float) -> dict:
    """One request to the driver. One that did not reach it whole (the
    driver, busy with many connections, pushed this one out before it was
    sent) is sent again, a few times."""
    address, port, secret = _driver()
    body = {**body, "worker": os.environ.get(WORKER_VARIABLE, "")}
    for pause in RESEND_PAUSES_S:
        try:
            return protocol.request(address, port, secret, body, timeout)
        except protocol.NotDelivered as error:
            log.debug("a request to ringrun's elastic driver did not arrive (%s); sending it again", error)
            time.sleep(pause)
    return protocol.request(address, port, secret, body, timeout)


def _apply(assignment: dict) -> None:
    """Puts the assignment where ringcc.init() (and scripts) read the job."""
    a = assignment
    values = {
        "RINGCC_RANK": a["rank"],
        "RINGCC_SIZE": a["size"],
        "RINGCC_LOCAL_RANK": a["local_rank"],
        "RINGCC_LOCAL_SIZE": a["local_size"],
        "RINGCC_CROSS_RANK": a["cross_rank"],
        "RINGCC_CROSS_SIZE": a["cross_size"],
        "RINGCC_HOSTNAME": a["host"],
        "RINGCC_MASTER_ADDR": a["master_addr"],
        "RINGCC_MASTER_PORT": a["master_port"],
        "HOROVOD_RANK": a["rank"],
        "HOROVOD_SIZE": a["size"],
        "HOROVOD_LOCAL_RANK": a["local_rank"],
        "HOROVOD_LOCAL_SIZE": a["local_size"],
        "HOROVOD_CROSS_RANK": a["cross_rank"],
        "HOROVOD_CROSS_SIZE": a["cross_size"],
        "RANK": a["rank"],
        "WORLD_SIZE": a["size"],
        "LOCAL_RANK": a["local_rank"],
        "LOCAL_WORLD_SIZE": a["local_size"],
    }
    os.environ.update({name: str(value) for name, value in values.items()})


def join() -> dict:
    """Waits for this worker's place in the next membership and applies it.
    Exits the process when the driver releases the worker."""
    global _generation
    while True:
        reply = call({"op": "join", "generation": _generation}, elastic_timeout_s() + 60)
        action = reply.get("action")
        if action == "leave":
            log.info("ringrun's elastic driver released this worker: %s", reply.get("reason", ""))
            raise SystemExit(0)
        if action == "stop":
            raise SystemExit(f"ringrun's elastic driver stopped the job: {reply.get('reason', '')}")
        if action == "retry":
            continue
        if action != "assign":
            raise RuntimeError(f"unexpected reply from ringrun's elastic driver: {reply}")
        if reply.get("choose_port"):
            port = free_port()  # for the store this worker serves as rank 0
            answer = call({"op": "port", "generation": reply["generation"], "port": port}, elastic_timeout_s() + 60)
            if answer.get("action") != "ok":
                continue  # the membership fell apart meanwhile: ask again
            reply["master_port"] = port
        _apply(reply)
        _generation = reply["generation"]
        return reply


def init(core_init: Callable[[], None], core) -> None:
    """ringcc.init() in an elastic worker: joins the next membership and
    meets it; a membership that falls apart while it meets (a peer died) is
    left and the next one joined."""
    while True:
        join()
        try:
            core_init()
            return
        except (core.PeerFailureError, core.TimeoutError, core.InternalError) as error:
            log.warning("the membership fell apart while it met (%s); joining the next one", error)
            try:
                core.shutdown()
            except Exception:  # noqa: BLE001 - leaving a broken job
                pass


def report_synced() -> None:
    global _synced
    if _synced or not active():
        return
    reply = call({"op": "synced"}, 60.0)
    if reply.get("action") != "ok":
        raise RuntimeError(f"unexpected reply from ringrun's elastic driver: {reply}")
    _synced = True


def start_watching(on_update: Callable[[float, int], None]) -> None:
    """Starts (once per process) the thread that hands host updates to `on_update`."""
    global _watch_thread
    with _lock:
        if _watch_thread is not None or not active():
            return
        _watch_thread = threading.Thread(target=_watch, args=(on_update,), name="ringcc-elastic-watch", daemon=True)
        _watch_thread.start()


def _watch(on_update: Callable[[float, int], None]) -> None:
    since = None
    while True:
        try:
            reply = call({"op": "watch", "since": since}, WATCH_POLL_S + 30)
        except (OSError, protocol.ProtocolError) as error:
            log.debug("watching for host updates: %s", error)
            time.sleep(1.0)
            continue
        timestamp = reply.get("timestamp")
        if timestamp is None:
            continue
        if since is not None and timestamp > since and reply.get("update"):
            on_update(timestamp, int(reply["update"]))
        since = timestamp
