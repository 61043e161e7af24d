"""Horovod's own examples/pytorch/pytorch_mnist.py, unchanged, on ringcc
through the `horovod` alias (ringcc/compat): under `ringrun -np 2`, and
with `--num-proc 2`, which makes it call horovod.run (ringcc.run). Only its
data loading is stubbed: a stand-in `torchvision` whose MNIST is a few
synthetic tensors.

The example is not in ringcc's repository: the test takes it from the
file RINGCC_HOROVOD_MNIST_EXAMPLE names (an offline copy), else from
Horovod 0.28.1's sdist (pip download; the sdist may not hold examples/),
else from GitHub at the tag v0.28.1, and is skipped, saying so, when none
of these has it. The alias and the stand-in live in a temporary directory
on the ranks' PYTHONPATH only."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("torch")

ADAPTERS_DIR = Path(__file__).resolve().parents[3] / "adapters"
HOROVOD_VERSION = "0.28.1"
EXAMPLE_PATH = "examples/pytorch/pytorch_mnist.py"
EXAMPLE_URL = f"https://raw.githubusercontent.com/horovod/horovod/v{HOROVOD_VERSION}/{EXAMPLE_PATH}"
DOWNLOAD_TIMEOUT_S = 180
RUN_TIMEOUT_S = 240
pytestmark = pytest.mark.timeout(2 * DOWNLOAD_TIMEOUT_S + 2 * RUN_TIMEOUT_S)

STAND_IN = {
    "__init__.py": '"""A stand-in for torchvision: MNIST as a few synthetic tensors, nothing downloaded."""\n\n'
    "from . import datasets, transforms  # noqa: F401\n",
    "datasets.py": """import torch


class MNIST(torch.utils.data.TensorDataset):
    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        count = 256 if train else 64
        generator = torch.Generator().manual_seed(1 if train else 2)
        images = torch.rand(count, 1, 28, 28, generator=generator)
        super().__init__(images, torch.randint(0, 10, (count,), generator=generator))
""",
    "transforms.py": """class _Transform:
    def __init__(self, *args, **kwargs):
        self.args = args

    def __call__(self, value):
        return value


Compose = ToTensor = Normalize = _Transform
""",
}


def _from_sdist(directory: Path) -> tuple[str | None, str]:
    command = [sys.executable, "-m", "pip", "download", "-q", f"horovod=={HOROVOD_VERSION}", "--no-deps"]
    command += ["--no-binary", ":all:", "--no-build-isolation", "-d", str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return None, f"pip download took over {DOWNLOAD_TIMEOUT_S} s"
    archives = sorted(directory.glob("horovod-*.tar.gz"))
    if not archives:
        return None, f"pip download failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    with tarfile.open(archives[0]) as archive:
        for member in archive.getmembers():
            if member.name.endswith("/" + EXAMPLE_PATH) and member.isfile():
                return archive.extractfile(member).read().decode(), ""
    return None, f"{archives[0].name} holds no {EXAMPLE_PATH}"


def _from_github() -> tuple[str | None, str]:
    try:
        with urllib.request.urlopen(EXAMPLE_URL, timeout=20) as response:
            return response.read().decode(), ""
    except OSError as error:
        return None, f"{EXAMPLE_URL}: {error}"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """Horovod's pytorch_mnist.py, as released, in a temporary directory."""
    directory = tmp_path_factory.mktemp("horovod_example")
    offline = os.environ.get("RINGCC_HOROVOD_MNIST_EXAMPLE")
    if offline:
        text, reasons = Path(offline).read_text(), []
    else:
        text, why = _from_sdist(directory)
        reasons = [why]
        if text is None:
            text, why = _from_github()
            reasons.append(why)
    if text is None:
        pytest.skip(f"Horovod's {EXAMPLE_PATH} is not reachable: {'; '.join(reasons)}")
    path = directory / "pytorch_mnist.py"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> dict:
    """Our environment with the alias and the stand-in torchvision on PYTHONPATH (and HOME, for the
    example's ~/.horovod_lock, in a temporary directory)."""
    root = tmp_path_factory.mktemp("horovod_alias")
    for name, text in STAND_IN.items():
        (root / "stand_in" / "torchvision").mkdir(parents=True, exist_ok=True)
        (root / "stand_in" / "torchvision" / name).write_text(text)
    source = [str(ADAPTERS_DIR)] if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")) else []
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = [str(root / "stand_in"), str(root / "alias"), *source, *inherited]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HOME": str(root)}
    env.update(RINGCC_TIMEOUT_S="30", OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "ringcc.compat", "install-horovod-alias", "--target", str(root / "alias")]
    installed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert installed.returncode == 0, installed.stderr
    return env


EXAMPLE_ARGS = ["--epochs", "1", "--batch-size", "32", "--test-batch-size", "32", "--log-interval", "1", "--no-cuda"]


def run_example(command, env, cwd):
    result = subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def assert_trained(output: str):
    # 256 synthetic images, 2 ranks of 128, batches of 32: 4 logged steps each.
    for rank in (0, 1):
        steps = re.findall(rf"^\[{rank}\]<stdout>: Train Epoch: 1 \[\d+/128 .*Loss: (\S+)$", output, re.M)
        assert len(steps) == 4, output
        assert all(float(loss) == float(loss) for loss in steps)  # not NaN
    assert re.search(r"^\[0\]<stdout>: Test set: Average loss: [0-9.]+, Accuracy", output, re.M), output


def test_the_example_trains_under_ringrun(example, environment, tmp_path):
    command = [sys.executable, "-m", "ringcc.launcher", "-np", "2", sys.executable, str(example), *EXAMPLE_ARGS]
    assert_trained(run_example(command + ["--data-dir", str(tmp_path)], environment, tmp_path))


def test_the_example_trains_through_horovod_run(example, environment, tmp_path):
    if importlib.util.find_spec("cloudpickle") is None:
        pytest.skip("horovod.run sends the example's main(), defined in __main__, which needs cloudpickle")
    command = [sys.executable, str(example), *EXAMPLE_ARGS, "--num-proc", "2", "--data-dir", str(tmp_path)]
    output = run_example(command, environment, tmp_path)
    assert "Running training through horovod.run" in output
    assert_trained(output)
