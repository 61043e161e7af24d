"""How the shared-memory allreduce writes its areas (RINGCC_SHM_STORES):
auto times plain stores and stores that bypass the cache and tells the
other ranks its choice; the forced ways run in the collective matrix
(tests/ranks/test_collectives.py: shm-3 bypass, shm-4 plain). The chooser itself
is unit-tested in tests/cpp/test_store_choice.cc. No timing is asserted."""

from __future__ import annotations

from rank_groups import rank_environment, ringrun_command, run_command

TIMEOUT_S = 120

# Allreduces of 32 KiB and up (where auto chooses), in place and out of place,
# fused by name, each checked; rank 0's debug log says what it chose.
JOB = r"""
import numpy as np
import ringcc
ringcc.init()
r, n = ringcc.rank(), ringcc.size()
for i in range(24):
    count = (1 << 18) + 1 + 4099 * i  # 1 MiB and a bit, float32
    x = np.arange(count, dtype=np.float32) % 97 + r
    ringcc.allreduce_(x)
    want = n * (np.arange(count, dtype=np.float32) % 97) + n * (n - 1) / 2
    assert np.array_equal(x, want), (i, x[:4], want[:4])
    tiny = (1 << 13) + 5 + 31 * i  # 32 KiB and a bit: one phase (RINGCC_SHM_SMALL_BYTES)
    w = np.arange(tiny, dtype=np.float32) % 13 + 2 * r
    ringcc.allreduce_(w)
    assert np.array_equal(w, n * (np.arange(tiny, dtype=np.float32) % 13) + n * (n - 1)), (i, w[:4])
    small = (1 << 16) + 3 + 257 * i  # 256 KiB and a bit: pieces
    z = np.arange(small, dtype=np.float32) % 89 - r
    ringcc.allreduce_(z)
    assert np.array_equal(z, n * (np.arange(small, dtype=np.float32) % 89) - n * (n - 1) / 2), (i, z[:4])
    y = ringcc.allreduce(np.full(count * 2, float(r + 1)), ringcc.Average)
    assert np.all(y == (n + 1) / 2), (i, y[:4])
    hs = [ringcc.allreduce_async(np.full(1 << 17, float(r + k)), name=f"t{k}") for k in range(12)]
    for k, h in enumerate(hs):
        assert np.all(ringcc.synchronize(h) == n * k + n * (n - 1) / 2), k
print("JOB DONE", r, flush=True)
ringcc.shutdown()
"""


def _run(tmp_path, num_ranks, env):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    return run_command(ringrun_command(num_ranks, [str(script)]), rank_environment(env), TIMEOUT_S)


def test_auto_tries_both_ways_and_stays_correct(ringcc_module, tmp_path):
    done = _run(tmp_path, 3, {"RINGCC_LOG_LEVEL": "debug", "RINGCC_FUSION_THRESHOLD": str(1 << 20)})
    assert done.returncode == 0, done.describe()
    assert done.stdout.count("JOB DONE") == 3, done.describe()
    # The first rank publishes its choices: after its first timed allreduce
    # of a size, the next one of that size bypasses the cache.
    choices = [line for line in done.stderr.splitlines() if "stores that bypass the cache for size classes" in line]
    assert choices, done.describe()
    assert all("rank 0 " in line for line in choices), choices
    assert any("classes 0x0 " not in line for line in choices), choices


def test_forced_bypass_stays_correct(ringcc_module, tmp_path):
    done = _run(tmp_path, 2, {"RINGCC_SHM_STORES": "bypass", "RINGCC_LOG_LEVEL": "debug"})
    assert done.returncode == 0, done.describe()
    assert done.stdout.count("JOB DONE") == 2, done.describe()
    assert "stores that bypass the cache for size classes" not in done.stderr, done.describe()


def test_unknown_store_mode_fails_at_init(ringcc_module, tmp_path):
    script = tmp_path / "init.py"
    script.write_text("import ringcc\nringcc.init()\n")
    done = run_command(ringrun_command(2, [str(script)]), rank_environment({"RINGCC_SHM_STORES": "fast"}), TIMEOUT_S)
    assert done.returncode not in (0, None), done.describe()
    assert "RINGCC_SHM_STORES must be auto, plain or bypass, not 'fast'" in done.stderr, done.describe()
