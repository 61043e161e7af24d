"""ringcc's opt-in `horovod` alias (ringcc/compat): installed into a
temporary directory put on the PYTHONPATH of child Pythons only, so the
test environment never gets it; refused over a real Horovod (a fake one
here: a `horovod` package without the alias's marker)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
CHILD_TIMEOUT_S = 120
pytestmark = pytest.mark.timeout(300)


def python(*args, path=(), check=True):
    """Runs a child Python with `path` first on its PYTHONPATH (and this tree's ringcc when built here)."""
    source = [str(ADAPTERS_DIR)] if any((ADAPTERS_DIR / "ringcc").glob("_core*.so")) else []
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), *source, *inherited])}
    result = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def install(target, path=(), check=True):
    return python("-m", "ringcc.compat", "install-horovod-alias", "--target", str(target), path=path, check=check)


def fake_horovod(where: Path) -> Path:
    package = where / "horovod"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.28.1"  # a real Horovod, as far as ringcc can tell\n')
    return package


PROBE = """
import json, sys
import horovod
import ringcc
report = {
    "version": horovod.__version__ == ringcc.__version__,
    "marker": horovod.__ringcc_alias__,
    "run": horovod.run is ringcc.run,
    "eager": sorted(m for m in ("tensorflow", "keras", "mxnet", "ringcc.tensorflow", "ringcc.keras", "ringcc.mxnet",
                                "torch", "ringcc.torch") if m in sys.modules),
}
try:
    import torch
except ImportError:
    pass
else:
    import horovod.torch as hvd
    import horovod.torch.elastic
    import ringcc.torch
    report["torch"] = hvd is ringcc.torch and horovod.torch is hvd and hvd.run is ringcc.run
    report["elastic"] = horovod.torch.elastic is ringcc.torch.elastic
print(json.dumps(report))
"""


def test_the_alias_is_ringcc_under_horovods_names_and_imports_frameworks_lazily(tmp_path):
    target = tmp_path / "alias"
    assert "installed ringcc's horovod alias" in install(target).stdout
    report = json.loads(python("-c", PROBE, path=[target]).stdout.splitlines()[-1])
    assert report["version"] and report["marker"] is True and report["run"]
    assert report["eager"] == []  # import horovod imported no framework
    if importlib.util.find_spec("torch") is not None:
        assert report["torch"] and report["elastic"]
    missing = python("-c", "import horovod; horovod.nothing", path=[target], check=False)
    assert "has no attribute 'nothing'" in missing.stderr
    removed = python("-m", "ringcc.compat", "uninstall-horovod-alias", "--target", str(target))
    assert "removed" in removed.stdout and not (target / "horovod").exists()


def test_installing_over_a_real_horovod_is_refused(tmp_path):
    real = fake_horovod(tmp_path / "site")
    target = tmp_path / "alias"
    refused = install(target, path=[real.parent], check=False)
    assert refused.returncode == 1
    assert f"a real Horovod is importable here ({real})" in refused.stderr
    assert not (target / "horovod").exists()
    # ... also when the real one is in the target directory itself,
    assert install(real.parent, check=False).returncode == 1
    assert "0.28.1" in (real / "__init__.py").read_text()
    # and uninstalling never removes it.
    kept = python("-m", "ringcc.compat", "uninstall-horovod-alias", "--target", str(real.parent), check=False)
    assert kept.returncode == 1 and "not ringcc's horovod alias" in kept.stderr and real.exists()


def test_an_alias_beside_a_real_horovod_refuses_to_hide_it(tmp_path):
    target = tmp_path / "alias"
    install(target)
    real = fake_horovod(tmp_path / "site")  # installed afterwards, later on sys.path
    hidden = python("-c", "import horovod", path=[target, real.parent], check=False)
    assert hidden.returncode == 1 and f"a real Horovod is installed ({real})" in hidden.stderr


KERAS_PROBE = """
import json
import horovod.tensorflow.keras as hvd
import horovod.tensorflow.keras.callbacks
import horovod.tensorflow.keras.elastic
from horovod.tensorflow.keras.callbacks import BroadcastGlobalVariablesCallback, MetricAverageCallback
import ringcc.keras
print(json.dumps({
    "callbacks": horovod.tensorflow.keras.callbacks is ringcc.keras.callbacks,
    "elastic": horovod.tensorflow.keras.elastic is ringcc.keras.elastic,
    "optimizer": hvd.DistributedOptimizer is ringcc.keras.DistributedOptimizer,
    "names": BroadcastGlobalVariablesCallback.__module__ + " " + MetricAverageCallback.__name__,
}))
"""


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_horovod_tensorflow_keras_submodules_through_the_alias(tmp_path):
    target = tmp_path / "alias"
    install(target)
    report = json.loads(python("-c", KERAS_PROBE, path=[target]).stdout.splitlines()[-1])
    assert report["callbacks"] and report["elastic"] and report["optimizer"], report
    assert report["names"] == "ringcc.keras.callbacks MetricAverageCallback"
