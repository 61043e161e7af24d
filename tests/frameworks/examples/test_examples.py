"""The scripts in examples/, as shipped, on 2 ranks, each in a few seconds:

* torch_ddp.py: DDP over backend "ring", under ringrun and under torchrun;
* pytorch_mnist_style.py: the Horovod recipe (`import ringcc.torch as hvd`),
  which writes nothing into the working directory unless asked to;
* jax_mlp.py: a jitted JAX training step with ringcc.jax.allreduce.

Each must learn (its loss goes down) and end with identical parameters on
every rank. tests/frameworks/torch/test_torch_horovod.py checks the recipe's numbers against a
single-process replay.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from rank_groups import HARD_TIMEOUT_MARGIN_S, rank_environment, ringrun_command, run_command

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
TIMEOUT_S = 180
ENV = {"RINGCC_TIMEOUT_S": "30", "OMP_NUM_THREADS": "1"}
HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install torch)")


def _launch(launcher, script, args=(), cwd=None, env=None):
    if launcher == "ringrun":
        command = ringrun_command(2, [str(script), *args], ["--timeout", str(TIMEOUT_S)])
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "--max-restarts",
            "0",
            str(script),
            *args,
        ]
    kwargs = {"cwd": str(cwd)} if cwd is not None else {}
    return run_command(command, rank_environment({**ENV, **(env or {})}), TIMEOUT_S + HARD_TIMEOUT_MARGIN_S, **kwargs)


@needs_torch
@pytest.mark.parametrize("launcher", ["ringrun", "torchrun"])
def test_torch_ddp(launcher, tmp_path):
    done = _launch(launcher, EXAMPLES / "torch_ddp.py", ["--steps", "25"], cwd=tmp_path)
    assert done.returncode == 0, done.describe()
    summary = [line for line in done.stdout.splitlines() if "parameters identical on all ranks" in line]
    assert len(summary) == 1, done.describe()
    assert "backend ring, 2 ranks" in summary[0] and summary[0].endswith("True"), summary[0]
    first, last = (float(v) for v in summary[0].split("loss ")[1].split(";")[0].split(" -> "))
    assert last < first
    assert not any(tmp_path.iterdir()), "the example wrote into its working directory"


@needs_torch
def test_horovod_style_recipe_writes_nothing_by_default(tmp_path):
    args = ["--epochs", "1", "--samples", "128", "--batch-size", "16", "--seed", "3"]
    done = _launch("ringrun", EXAMPLES / "pytorch_mnist_style.py", args, cwd=tmp_path)
    assert done.returncode == 0, done.describe()
    assert "Test set: Average loss" in done.stdout, done.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the recipe wrote into its working directory"


def _jax_handlers_built():
    import ringcc

    return HAVE_JAX and bool(getattr(ringcc._core, "jax_ffi_targets", dict)())


@pytest.mark.skipif(not _jax_handlers_built(), reason="jax is not installed, or this ringcc has no XLA FFI handlers")
def test_jax_mlp(tmp_path):
    """The jitted training step on 2 ranks: loss goes down, parameters bit-identical."""
    out = tmp_path / "out"
    done = _launch(
        "ringrun",
        EXAMPLES / "jax_mlp.py",
        ["--steps", "30", "--out", str(out)],
        cwd=tmp_path,
        env={"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"},
    )
    assert done.returncode == 0, done.describe()
    assert "parameters identical on all ranks: True" in done.stdout, done.describe()
    files = [np.load(out / f"params_rank{r}.npz") for r in range(2)]
    leaves = sorted(k for k in files[0].files if k.startswith("leaf"))
    assert len(leaves) == 6
    for key in leaves:
        np.testing.assert_array_equal(files[0][key], files[1][key], err_msg=key)
    assert float(files[0]["last_loss"]) < float(files[0]["first_loss"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
