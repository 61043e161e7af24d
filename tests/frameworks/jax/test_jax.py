"""ringcc.jax: the collectives as XLA FFI custom calls, in groups of 1 to 4 ranks.

Each group in MATRIX starts once (ringrun ... tests/frameworks/jax/jax_cases.py) and runs
every case of jax_cases.CASES (every collective against NumPy, eager and
jitted, several in one jitted function, grad, vmap, donation, errors); each
test below asserts on one case in one group. The MLP example
(examples/jax_mlp.py) runs in tests/frameworks/examples/test_examples.py.

Skipped when JAX is not installed, or when this ringcc was built without the
XLA FFI handlers (no jaxlib at build time).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jax_cases import CASES

REPO = Path(__file__).resolve().parents[3]
HAVE_JAX = importlib.util.find_spec("jax") is not None


def _handlers_built(ringcc_module):
    return bool(getattr(ringcc_module._core, "jax_ffi_targets", dict)())


@pytest.fixture(scope="module")
def jax_ready(ringcc_module):
    if not HAVE_JAX:
        pytest.skip("jax is not installed (pip install jax)")
    if not _handlers_built(ringcc_module):
        pytest.skip("this ringcc was built without the XLA FFI handlers (no jaxlib headers at build time)")
    return True


MATRIX = {
    "jax-1": (1, {}),
    "jax-2": (2, {}),
    "jax-3": (3, {}),
    "jax-4": (4, {}),
    "jax-tcp-2": (2, {"RINGCC_TRANSPORT": "tcp"}),
}
# One XLA thread pool per rank on a small machine; a stuck collective fails
# within RINGCC_TIMEOUT_S instead of the default 60 s.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "30", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "JAX_PLATFORMS": "cpu"}


def group_run(ranks, config):
    size, env = MATRIX[config]
    return ranks.group(config, size, "frameworks/jax/jax_cases.py", env={**GROUP_ENV, **env})


CASE_PARAMS = [
    pytest.param(config, case.name, id=f"{config}:{case.name}")
    for config, (size, _) in MATRIX.items()
    for case in CASES.select(size, ())
]


@pytest.mark.parametrize("config,case_name", CASE_PARAMS)
def test_case(jax_ready, ranks, config, case_name):
    group_run(ranks, config).assert_case(case_name)


@pytest.mark.parametrize("config", list(MATRIX))
def test_group_finished_cleanly(jax_ready, ranks, ringcc_module, config):
    run = group_run(ranks, config)
    run.assert_clean_exit()
    size, env = MATRIX[config]
    for rank in range(size):
        start = run.start_record(rank)
        assert start["size"] == size
        assert Path(start["ringcc_file"]).resolve() == Path(ringcc_module.__file__).resolve()
        if size > 1:
            assert start["transport"] == env.get("RINGCC_TRANSPORT", "shm")


def _python(code, ringcc_module):
    """Runs `code` in a fresh interpreter that imports the ringcc the tests use."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGCC_")}
    env["PYTHONPATH"] = str(Path(ringcc_module.__file__).resolve().parent.parent)
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=120
    )


def test_import_without_jax_explains(ringcc_module):
    done = _python("import sys; sys.modules['jax'] = None\nimport ringcc.jax", ringcc_module)
    assert done.returncode != 0
    assert "ringcc.jax needs JAX" in done.stderr and "pip install jax" in done.stderr, done.stderr


def test_import_without_handlers_explains(ringcc_module):
    if not HAVE_JAX:
        pytest.skip("jax is not installed")
    done = _python("import ringcc._core as c\nc.jax_ffi_targets = lambda: {}\nimport ringcc.jax", ringcc_module)
    assert done.returncode != 0
    assert "no XLA FFI handlers" in done.stderr and "RINGCC_JAX_FFI" in done.stderr, done.stderr


def test_build_info_flag(ringcc_module):
    info = ringcc_module.build_info()
    assert info["jax_ffi"] == _handlers_built(ringcc_module)
    if info["jax_ffi"]:
        major, minor = ringcc_module._core.jax_ffi_api_version()
        assert major == 0 and minor >= 1


def test_adapter_uses_jax_public_api_only():
    """No module of ringcc.jax imports (or reaches into) jax._src, but for
    _token_guard.py, which says why and does nothing where JAX's internals
    differ (its import of them is guarded)."""
    for path in sorted((REPO / "adapters" / "ringcc" / "jax").glob("*.py")):
        text = path.read_text()
        if path.name == "_token_guard.py":
            assert "except ImportError" in text and text.count("jax._src") == 1, text
            continue
        assert "_src" not in text, f"{path.name} uses JAX's private modules"


def test_import_warns_outside_the_tested_jax_range(jax_ready, ringcc_module):
    from ringcc._versions import TESTED_JAX

    code = (
        "import logging, ringcc.jax as rj\n"
        "print(repr(rj._check_jax_version('0.5.3')))\n"
        f"print(repr(rj._check_jax_version('{TESTED_JAX[0]}.0')))\n"
        f"print(repr(rj._check_jax_version('{TESTED_JAX[1]}.0')))\n"
    )
    done = _python(code, ringcc_module)
    assert done.returncode == 0, done.stderr
    below, low, high = done.stdout.splitlines()
    assert "jax 0.5.3" in below and f"jax >= {TESTED_JAX[0]} and < {TESTED_JAX[1]}" in below
    assert low == "None" and "jax " + TESTED_JAX[1] + ".0" in high
    # Logged as warnings of "ringcc.jax", one per call outside the range and none for the
    # installed jax (inside the range), at import.
    warnings = [line for line in done.stderr.splitlines() if "ringcc.jax is tested with" in line]
    assert len(warnings) == 2 and all("WARNING" in line for line in warnings), done.stderr
