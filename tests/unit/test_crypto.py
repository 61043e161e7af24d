"""The core's SHA-256 and HMAC-SHA-256 (core/base/sha256.cc, which
authenticates the rendezvous store and the links) against RFC 4231's test
vectors and against Python's hashlib and hmac on random keys and messages,
lengths chosen around the 64-byte block and the padding boundary."""

from __future__ import annotations

import hashlib
import hmac
import random

import pytest

import ringcc
from ringcc import _core

# RFC 4231, section 4: (key, data, HMAC-SHA-256; test case 5 truncated to 128 bits).
RFC4231 = [
    (b"\x0b" * 20, b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 20, b"\xdd" * 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
    (bytes(range(1, 26)), b"\xcd" * 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
    (b"\x0c" * 20, b"Test With Truncation", "a3b6167473100ee06e0c796c2955552b"),
    (
        b"\xaa" * 131,
        b"Test Using Larger Than Block-Size Key - Hash Key First",
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
    ),
    (
        b"\xaa" * 131,
        b"This is a test using a larger than block-size key and a larger than block-size data. "
        b"The key needs to be hashed before being used by the HMAC algorithm.",
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
    ),
]

LENGTHS = [0, 1, 31, 32, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096]


@pytest.mark.parametrize("case", range(1, len(RFC4231) + 1))
def test_hmac_sha256_matches_rfc4231(case):
    key, data, expected = RFC4231[case - 1]
    got = _core._hmac_sha256(key, data).hex()
    assert got[: len(expected)] == expected
    assert got == hmac.new(key, data, hashlib.sha256).hexdigest()


def test_hmac_sha256_matches_python_on_random_inputs():
    rng = random.Random(4231)
    for key_len in LENGTHS:
        for data_len in LENGTHS:
            key = rng.randbytes(key_len)
            data = rng.randbytes(data_len)
            assert _core._hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).digest(), (key_len, data_len)
    for _ in range(200):
        key = rng.randbytes(rng.randrange(0, 300))
        data = rng.randbytes(rng.randrange(0, 3000))
        assert _core._hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).digest()


def test_sha256_matches_hashlib():
    rng = random.Random(256)
    assert _core._sha256(b"abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    for n in LENGTHS + [rng.randrange(0, 100000) for _ in range(20)]:
        data = rng.randbytes(n)
        assert _core._sha256(data) == hashlib.sha256(data).digest(), n


def test_objects_unpickle_only_with_their_mac():
    """Pickled objects travel with a MAC (ringcc/_objects.py): a payload
    changed on its way, a MAC made under another job's key, or a MAC cut
    short is refused before anything is unpickled."""
    import pickle

    from ringcc import _objects

    key, other = b"k" * 32, b"o" * 32
    data = pickle.dumps({"a": [1, 2]})
    assert _objects.loads(data, _objects.mac(data, key), "rank 1", key) == {"a": [1, 2]}
    assert _objects.loads(data, _objects.mac_words(data, key), "rank 1", key) == {"a": [1, 2]}
    changed = bytearray(data)
    changed[-2] ^= 0x40
    for payload, sent, used in (
        (bytes(changed), _objects.mac(data, key), key),
        (data, _objects.mac(data, other), key),
        (data, _objects.mac(data, key)[:20], key),
        (data, b"", key),
    ):
        with pytest.raises(ringcc.PeerFailureError, match="the object from rank 1 failed authentication"):
            _objects.loads(payload, sent, "rank 1", used)
