"""Strangers who can write to an adapter's store: torch's TCPStore listens on
every address and is unauthenticated, so another user on the machine may
write whatever a rank reads there. Nothing read there may lower a rank's
security: the stranger may stop the job, never join it.

The stranger is a process of another user (uid 65534) that poses as rank 0
of a torch group before the real rank 0 arrives: it answers the victim's
incarnation handshake, reports where it runs, and (with RINGCC_INSECURE=1 of
its own) offers a job secret through the store. The victim is rank 1 of a
plain torchrun-style job without any RINGCC_* setting. The tests need root
(to start the stranger as another user); they skip elsewhere.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rank_groups import rank_environment

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

STRANGER_UID = 65534
LIMIT_S = 60

# The victim: rank 1 of a 2-rank group meeting through the test's store,
# then a broadcast_object_list from rank 0 (which unpickles what it gets).
VICTIM = textwrap.dedent(
    """
    import datetime, sys
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=datetime.timedelta(seconds=30))
    try:
        dist.init_process_group("ring", store=dist.PrefixStore("job", store), rank=1, world_size=2,
                                timeout=datetime.timedelta(seconds=20))
        objects = [None]
        dist.broadcast_object_list(objects, src=0)
        print("JOINED", objects, flush=True)
    except Exception as error:
        print("REFUSED", type(error).__name__, error, flush=True)
    """
)

# The stranger: everything imported as root, then it becomes uid 65534 and
# plays rank 0. Its object, unpickled, creates the file MARKER.
STRANGER = textwrap.dedent(
    """
    import datetime, os, sys
    import torch, torch.distributed as dist
    import ringcc, ringcc.torch
    port, host, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.setgroups([])
    os.setgid(STRANGER_UID)
    os.setuid(STRANGER_UID)
    assert os.geteuid() == STRANGER_UID
    os.environ["RINGCC_INSECURE"] = "1"
    os.environ["RINGCC_HOSTNAME"] = host
    os.environ["RINGCC_ADVERTISE_ADDR"] = "127.0.0.1"

    class Payload:
        def __reduce__(self):
            return (open, (marker, "w"))

    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=30))
    try:
        dist.init_process_group("ring", store=dist.PrefixStore("job", store), rank=0, world_size=2,
                                timeout=datetime.timedelta(seconds=20))
        dist.broadcast_object_list([Payload()], src=0)
        print("STRANGER-IN", flush=True)
    except Exception as error:
        print("STRANGER-OUT", type(error).__name__, error, flush=True)
    """
).replace("STRANGER_UID", str(STRANGER_UID))


def stranger_available() -> str:
    if os.geteuid() != 0:
        return "starting a process of another user needs root"
    try:
        pwd.getpwuid(STRANGER_UID)
    except KeyError:
        return f"no user with uid {STRANGER_UID}"
    return ""


pytestmark = pytest.mark.skipif(bool(stranger_available()), reason=stranger_available() or "ok")


def run_attack(tmp_path: Path, stranger_host: str, victim_env: dict) -> tuple[str, str, bool]:
    """The victim (rank 1) and the stranger (posing as rank 0) meet through
    a store of the test's. Returns both outputs and whether the payload ran."""
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    marker = tmp_path / "payload-ran"
    base = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(server.port), "RINGCC_TIMEOUT_S": "20"}
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, str(server.port)],
        env=rank_environment({**base, "RANK": "1", "LOCAL_RANK": "1", **victim_env}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stranger = subprocess.Popen(
        [sys.executable, "-c", STRANGER, str(server.port), stranger_host, str(marker)],
        env=rank_environment({"PYTHONDONTWRITEBYTECODE": "1"}),
        cwd="/",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    outputs = []
    for process in (victim, stranger):
        try:
            outputs.append(process.communicate(timeout=LIMIT_S)[0])
        except subprocess.TimeoutExpired:
            process.kill()
            outputs.append(process.communicate()[0] + "\n(killed after the test's limit)")
    return outputs[0], outputs[1], marker.exists()


def test_a_stranger_posing_as_rank_0_elsewhere_is_refused_by_the_launchers_word(tmp_path):
    """The victim's launcher says every rank runs on this host: a rank 0
    that says it runs elsewhere is not one of the job's."""
    victim, stranger, payload_ran = run_attack(tmp_path, "elsewhere", {"LOCAL_WORLD_SIZE": "2"})
    assert not payload_ran, f"the stranger's object was unpickled in the victim:\n{victim}\n{stranger}"
    assert "REFUSED InvalidArgumentError" in victim, victim
    assert "rank 0 says it runs on 'elsewhere'" in victim and "LOCAL_WORLD_SIZE equals the world size" in victim, victim
    assert "STRANGER-IN" not in stranger, stranger


def test_a_stranger_offering_a_secret_through_the_store_is_refused(tmp_path):
    """Nothing says the job is on one host: rank 0's word that the secret
    comes through the store is followed only by a rank that allows it."""
    victim, stranger, payload_ran = run_attack(tmp_path, "elsewhere", {})
    assert not payload_ran, f"the stranger's object was unpickled in the victim:\n{victim}\n{stranger}"
    assert "REFUSED InvalidArgumentError" in victim, victim
    assert "ringcc/secret-how='store'" in victim and "not started with RINGCC_INSECURE=1" in victim, victim
    assert "STRANGER-IN" not in stranger, stranger


def test_a_stranger_posing_as_rank_0_on_this_host_is_refused(tmp_path):
    """A rank 0 that says it runs here must be a process of this user."""
    victim, stranger, payload_ran = run_attack(tmp_path, socket.gethostname(), {"LOCAL_WORLD_SIZE": "2"})
    assert not payload_ran, f"the stranger's object was unpickled in the victim:\n{victim}\n{stranger}"
    assert "REFUSED InvalidArgumentError" in victim, victim
    assert "no process of this user has that pid here" in victim, victim
    assert "STRANGER-IN" not in stranger, stranger


def test_names_another_user_took_first_are_passed_over(tmp_path):
    """Another user makes, before the job starts, the names a single-host
    job's secret could live under in /dev/shm (a secret file keyed by the
    port, the private directory): the job passes them over and runs, and
    leaves nothing in them."""
    import shutil

    from test_security import free_port_pair
    from test_two_jobs import job_env, outcome, start, sums

    port = free_port_pair()
    directory = Path(f"/dev/shm/ringcc-u{os.geteuid()}")
    old_style = Path(f"/dev/shm/ringcc-secret-u{os.geteuid()}-port{port + 1}")
    shutil.rmtree(directory, ignore_errors=True)
    try:
        for path, make in ((directory, lambda p: p.mkdir(mode=0o777)), (old_style, lambda p: p.write_text("x"))):
            make(path)
            os.chown(path, STRANGER_UID, STRANGER_UID)
            path.chmod(0o777 if path.is_dir() else 0o644)
        ranks = [start(tmp_path, f"r{r}", job_env(port, r, 10)) for r in range(2)]
        outputs = [outcome(p, tmp_path, f"r{r}") for r, p in enumerate(ranks)]
        assert [sums(text) for text in outputs] == [[21.0], [21.0]], outputs
        assert list(directory.iterdir()) == [], "the job used a directory another user made"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        old_style.unlink(missing_ok=True)
