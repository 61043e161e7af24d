"""Python objects that travel through collectives, pickled and authenticated.

A rank unpickles only what a rank of its own job sent: each pickle travels
with an HMAC-SHA-256 under a key derived from the job secret
(`Communicator.object_key`), checked before `pickle.loads`. Whoever can
write to the network path between hosts (the links are authenticated at
their start, not per message) can then break an object collective, but
not run code in a rank. The tensors themselves stay unauthenticated
(docs/api.md, "Security").

The MAC travels beside the pickle (with its size), so that a large pickle
is never copied to put the two together.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle

import numpy as np

from ringcc import _core

MAC_BYTES = 32
# The MAC as int64 words, to travel in the tensor that carries the size.
MAC_WORDS = MAC_BYTES // 8


def mac(data, key: bytes | None = None) -> bytes:
    """The MAC of `data` (a pickle) under this job's key, or `key`."""
    return hmac.new(_core._object_key() if key is None else key, data, hashlib.sha256).digest()


def mac_words(data, key: bytes | None = None) -> list[int]:
    """mac(data) as MAC_WORDS int64 values."""
    return np.frombuffer(mac(data, key), dtype=np.int64).tolist()


def loads(data, sent_mac, sender: str, key: bytes | None = None):
    """The object pickled in `data` by `sender` (e.g. "rank 2"), once
    `sent_mac` (bytes, or MAC_WORDS int64 values) is found to be its MAC;
    PeerFailureError, with nothing unpickled, otherwise."""
    if not isinstance(sent_mac, (bytes, bytearray)):
        sent_mac = np.asarray(sent_mac, dtype=np.int64).tobytes()
    if len(sent_mac) != MAC_BYTES or not hmac.compare_digest(bytes(sent_mac), mac(data, key)):
        raise _core.PeerFailureError(
            f"the object from {sender} failed authentication (it was changed on its way, or was not sent by a rank "
            "of this job): it was not unpickled"
        )
    return pickle.loads(data)
