"""The libraries people train with, on backend "ring".

Lightning and Accelerate destroy and remake the default group; torch's rank 0
drops the store it serves with its group, so leaving a group must not call
that store.
"""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

from conftest import rank_environment, ringrun_command, run_command  # noqa: E402

GROUP_ENV = {"RINGCC_TIMEOUT_S": "20", "OMP_NUM_THREADS": "1"}
# What torch's TCPStore client logs when a call finds the store's server gone.
STORE_GONE = "recvValue failed"


def test_destroy_after_rank_0_left_is_quiet(tmp_path):
    """Rank 0 serves torch's store and destroys its "ring" group first; rank 1
    destroys its own a moment later, as a script's last line does. Leaving
    the group must not call the store (whose server went with rank 0's
    group): gloo's ranks leave without a word, and so must ring's."""
    code = textwrap.dedent(
        """
        import time, torch, torch.distributed as dist
        import ringcc.torch  # registers "ring" where no entry point is installed
        dist.init_process_group("ring")
        t = torch.ones(3)
        dist.all_reduce(t)
        if dist.get_rank() == 1:
            time.sleep(1.0)
        dist.destroy_process_group()
        print("left", t.tolist())
        """
    )
    completed = run_command(ringrun_command(2, ["-c", code], ["--timeout", "60"]), rank_environment(GROUP_ENV), 90)
    assert completed.returncode == 0, completed.describe()
    assert completed.stdout.count("left [2.0, 2.0, 2.0]") == 2, completed.describe()
    assert STORE_GONE not in completed.stderr, completed.describe()
