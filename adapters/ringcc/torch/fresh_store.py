"""A part of torch's store that no earlier incarnation of the group wrote to.

torchrun's agent serves one TCPStore for the whole run (the workers connect
to it: TORCHELASTIC_USE_AGENT_STORE), and every attempt after a restart, and
every new membership, creates its process groups under the same keys. A
rank of the new attempt could then read what a rank of the old one left
there (a job id, a shared-memory segment's name, an address) and wait for a
process that is gone. gloo meets the same keys and fails such an attempt.

Before a group meets, its ranks agree on a fresh prefix:

1. every rank r > 0 writes a fresh nonce under `want/r`;
2. rank 0 (itself always of the new attempt) picks a fresh id and publishes
   it with the nonces it read under `job`;
3. rank r takes the id once `job` carries its own nonce, and confirms under
   `<id>/ack/r`; a `job` of an old attempt never carries a fresh nonce;
4. rank 0 re-reads the `want` of the ranks that have not confirmed (it may
   have read an old attempt's) and publishes again, under the same id, until
   every rank has confirmed.

The group then meets under `<id>/`. Every wait is bounded by `timeout_s`.
"""

from __future__ import annotations

import secrets
import time

from ringcc import _core

PREFIX = "ringcc/incarnation/"
REREAD_S = 0.25  # how long rank 0 waits for confirmations before reading `want` again


def _poll(store, keys, deadline: float, what: str) -> None:
    delay = 0.0005
    while not store.check(keys):
        if time.monotonic() > deadline:
            raise _core.TimeoutError(f"timed out {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


def _text(value) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def fresh_prefix(store, rank: int, size: int, timeout_s: float) -> str:
    """The prefix, ending in "/", under which this incarnation of the group meets."""
    if size == 1:
        return f"{PREFIX}{secrets.token_hex(8)}/"
    deadline = time.monotonic() + timeout_s
    job_key = PREFIX + "job"
    if rank != 0:
        nonce = secrets.token_hex(8)
        store.set(f"{PREFIX}want/{rank}", nonce)
        delay = 0.0005
        while True:
            _poll(store, [job_key], deadline, f"after {timeout_s:g} s waiting for rank 0 of this group to start it")
            job_id, _, nonces = _text(store.get(job_key)).partition(" ")
            if nonces.split(",")[rank - 1 : rank] == [nonce]:
                store.set(f"{PREFIX}{job_id}/ack/{rank}", nonce)
                return f"{PREFIX}{job_id}/"
            if time.monotonic() > deadline:
                raise _core.TimeoutError(
                    f"timed out after {timeout_s:g} s waiting for rank 0 of this group to start it"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
    job_id = secrets.token_hex(8)
    want_keys = [f"{PREFIX}want/{r}" for r in range(1, size)]
    ack_keys = [f"{PREFIX}{job_id}/ack/{r}" for r in range(1, size)]
    nonces = [""] * (size - 1)
    confirmed = [False] * (size - 1)
    while True:
        try:
            _poll(store, want_keys, deadline, "")
        except _core.TimeoutError:
            missing = [r for r in range(1, size) if not store.check([want_keys[r - 1]])]
            raise _core.TimeoutError(
                f"timed out after {timeout_s:g} s waiting for rank(s) {missing} of this group to arrive"
            ) from None
        for i, key in enumerate(want_keys):
            if not confirmed[i]:
                nonces[i] = _text(store.get(key))
        store.set(job_key, f"{job_id} {','.join(nonces)}")
        reread = min(deadline, time.monotonic() + REREAD_S)
        delay = 0.0005
        while True:
            for i, key in enumerate(ack_keys):
                if not confirmed[i] and store.check([key]):
                    confirmed[i] = _text(store.get(key)) == nonces[i]
            if all(confirmed):
                return f"{PREFIX}{job_id}/"
            if time.monotonic() > reread:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        if time.monotonic() > deadline:
            missing = [r for r in range(1, size) if not confirmed[r - 1]]
            raise _core.TimeoutError(
                f"timed out after {timeout_s:g} s waiting for rank(s) {missing} of this group to arrive"
            )
