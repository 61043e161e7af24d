"""The decoders of what peers and strangers send, fed mutated bytes.

Builds tests/fuzz/fuzz_decoders.cc (only the sources it exercises) with
AddressSanitizer and UndefinedBehaviorSanitizer and runs every target for a
bounded time: the link handshake from both ends, the rendezvous store's
handshake and requests, the engine's negotiation messages and the collective
headers. Any crash, sanitizer report, allocation over 256 MiB, input that
hangs, or server that stops serving real clients fails it, naming the seed
and iteration that reproduce the finding. RINGCC_FUZZ_SECONDS (default 20)
and RINGCC_FUZZ_SEED (default: a new one each run, printed) set the run;
docs/testing.md ("Fuzzing") gives the longer runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO_DIR / "build" / "fuzz-test"
TARGETS = ("negotiation", "op_header", "store_server", "link_acceptor", "link_connector")


def build_fuzzer() -> Path:
    cmake = shutil.which("cmake")
    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if cmake is None or compiler is None:
        why = "the fuzzer needs cmake and a C++ compiler (pip install '.[test]' brings cmake)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    generator = ["-G", "Ninja"] if shutil.which("ninja") and not (BUILD_DIR / "Makefile").exists() else []
    configure = [
        cmake,
        "-S",
        str(REPO_DIR),
        "-B",
        str(BUILD_DIR),
        *generator,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DRINGCC_BUILD_FUZZERS=ON",
        "-DRINGCC_SANITIZE=address,undefined",
    ]
    for command in (configure, [cmake, "--build", str(BUILD_DIR), "--target", "ringcc_fuzz", "-j", "2"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return BUILD_DIR / "ringcc_fuzz"


def test_decoders_survive_mutated_input():
    fuzzer = build_fuzzer()
    seconds = float(os.environ.get("RINGCC_FUZZ_SECONDS", "20"))
    seed = os.environ.get("RINGCC_FUZZ_SEED") or str(int(time.time()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RINGCC_", "HOROVOD_", "ASAN_", "UBSAN_"))}
    env.pop("LD_PRELOAD", None)
    command = [str(fuzzer), "--seconds", str(seconds), "--seed", seed]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 120)
    output = done.stdout + done.stderr
    print(output)
    assert done.returncode == 0 and "no findings" in done.stdout, (
        f"{' '.join(command)} (exit {done.returncode}):\n{output[-12000:]}"
    )
    for target in TARGETS:
        found = re.search(rf"^{target}\s+(\d+) iterations\s+(\d+) rejected\s+(\d+) accepted", done.stdout, re.M)
        assert found, f"target {target} did not run:\n{done.stdout}"
        iterations, rejected, accepted = map(int, found.groups())
        # Each target ran in earnest and saw both verdicts (the link
        # acceptor accepts exactly one valid claim: its seed, unmutated).
        assert iterations >= 100 and rejected > 0, (target, iterations, rejected, accepted)
