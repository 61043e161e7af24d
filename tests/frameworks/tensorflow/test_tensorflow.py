"""ringcc.tensorflow and ringcc.keras: TensorFlow ops in groups of 2 and 3
ranks, a rank that raises inside model.fit, and the same Keras script on
the TensorFlow, JAX and PyTorch backends.

Each group in MATRIX starts once (ringrun ... tests/frameworks/tensorflow/tensorflow_cases.py)
and runs every case of tensorflow_cases.CASES; each test below asserts on
one case in one group. Skipped when TensorFlow or Keras 3 is not installed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from tensorflow_cases import CASES

REPO = Path(__file__).resolve().parents[3]
HAVE_TF = importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("keras") is not None


@pytest.fixture(scope="module")
def tf_ready(ringcc_module):
    if not HAVE_TF:
        pytest.skip("tensorflow and keras are not installed (pip install tensorflow-cpu keras)")
    library = Path(ringcc_module._core.__file__).parent / "libringcc_tensorflow.so"
    if not library.exists():
        pytest.skip(f"this ringcc was built without its TensorFlow ops ({library} is missing)")
    return True


MATRIX = {"tf-2": (2, {}), "tf-3": (3, {})}
# A stuck collective fails within RINGCC_TIMEOUT_S; TensorFlow's thread
# pools stay small on a small machine.
GROUP_ENV = {"RINGCC_TIMEOUT_S": "60", "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": "tensorflow"}
GROUP_TIMEOUT_S = 400


def group_run(ranks, config):
    size, env = MATRIX[config]
    return ranks.group(
        config, size, "frameworks/tensorflow/tensorflow_cases.py", env={**GROUP_ENV, **env}, timeout=GROUP_TIMEOUT_S
    )


CASE_PARAMS = [
    pytest.param(config, case.name, id=f"{config}:{case.name}")
    for config, (size, _) in MATRIX.items()
    for case in CASES.select(size, ())
]


@pytest.mark.parametrize("config,case_name", CASE_PARAMS)
def test_case(tf_ready, ranks, config, case_name):
    group_run(ranks, config).assert_case(case_name)


@pytest.mark.parametrize("config", list(MATRIX))
def test_group_finished_cleanly(tf_ready, ranks, config):
    group_run(ranks, config).assert_clean_exit()


def _run_job(ranks, name, size, script_args, env=None, timeout=300):
    out = ranks.scratch_dir(name)
    command = ranks.command(size, script_args, ["--timeout", str(timeout)])
    environment = ranks.environment({**GROUP_ENV, **(env or {}), "RINGCC_TF_OUT": str(out)})
    completed = ranks.run(command, environment, timeout + 60)
    return completed, out


def test_a_rank_that_raises_inside_fit_fails_every_rank(tf_ready, ranks):
    """Of 3 ranks, rank 1 raises from a callback in its third batch: it
    exits (aborting ringcc), and the model.fit of rank 0 and of rank 2 each
    fails within seconds with TensorFlow's AbortedError carrying
    ringcc.PeerFailureError naming rank 1; an eager collective after it
    fails at once as ringcc.PeerFailureError, AbortedError and
    HorovodInternalError together."""
    completed, out = _run_job(
        ranks,
        "tf-fit-raises",
        3,
        [str(Path(__file__).resolve().parent / "tensorflow_fit_raises.py")],
        env={"RINGCC_TIMEOUT_S": "60"},
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0, output[-4000:]
    assert "deliberate failure in rank 1" in output, output[-4000:]
    for rank in (0, 2):
        record_path = out / f"rank{rank}.json"
        assert record_path.exists(), f"rank {rank} recorded no error\n" + output[-4000:]
        record = json.loads(record_path.read_text())
        assert record["error_class"] in ("AbortedError", "PeerFailureError"), (rank, record)
        assert "ringcc.PeerFailureError" in record["message"], (rank, record)
        assert "rank 1" in record["message"], (rank, record)
        assert record["seconds"] < 30, (rank, record)
        eager = record["eager_classes"]
        for cls in ("PeerFailureError", "AbortedError", "HorovodInternalError"):
            assert cls in eager, (rank, record)
        assert "ringcc.PeerFailureError" in record["eager_message"], (rank, record)
    assert not (out / "rank1.json").exists()


# (collective, how it runs, rank 1's group, rank 0's group, the job's
# fusion threshold): groups of 8 or more tensors of 16 B travel packed, a
# threshold of 256 B cutting 20 of them into 2 packs, 10 into one; 7 do not.
GROUPS_THAT_DIFFER = [
    ("allreduce", "eager", 2, 3, None),
    ("allreduce", "graph", 2, 3, None),
    ("allgather", "eager", 2, 3, None),
    ("reducescatter", "graph", 2, 3, None),
    ("allreduce", "graph", 1, 3, None),
    ("allgather", "eager", 1, 3, None),
    ("allreduce", "graph", 10, 20, 256),
    ("allreduce", "eager", 7, 9, None),
    ("allreduce", "graph", 7, 20, 256),
    # A TF1 session orders no stateful op by itself: the group's own ops do.
    ("allreduce", "session", 10, 20, 256),
    ("allreduce", "session", 7, 20, 256),
]


@pytest.mark.parametrize("kind,how,short,long,threshold", GROUPS_THAT_DIFFER)
def test_groups_of_different_lengths_fail_every_rank(tf_ready, ranks, kind, how, short, long, threshold):
    """Rank 0 groups `long` tensors, rank 1 `short` of the same shape: rank 1
    fails at once with a MismatchError about the tensors grouped with the
    first (the group's layout; "this rank: a group of 2 tensors"), instead
    of returning the first two combined with rank 0's; rank 0 fails at once
    too (rank 1's kernel fails its other collectives), and the same call
    then runs on both with agreeing groups. A group of one shares the name
    of a longer group's first collective, so it fails as soon too; so do
    groups cut into different numbers of packs (the first pack of the rank
    with fewer fails the other's extra ones), and a packed group against
    one that is not (the pack's kernel fails the other's extra collectives)."""
    env = {"RINGCC_COLLECTIVE_TIMEOUT_S": "30", "RINGCC_TIMEOUT_S": "30"}
    if threshold:
        env["RINGCC_FUSION_THRESHOLD"] = str(threshold)
    completed, out = _run_job(
        ranks,
        f"tf-group-mismatch-{kind}-{how}-{short}-{long}",
        2,
        [str(Path(__file__).resolve().parent / "tensorflow_group_mismatch.py"), kind, how, str(short), str(long)],
        env=env,
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    records, again = {}, {}
    for rank in (0, 1):
        path = out / f"rank{rank}.json"
        assert path.exists(), f"rank {rank} recorded nothing\n" + output[-4000:]
        recorded = json.loads(path.read_text())
        records[rank], again[rank] = recorded[how], recorded["again"]
    words = {2: "this rank: a group of 2 tensors", 1: "rank 1: 1)", 10: "this rank: 10 tensors of float32 packed"}
    shorter = records[1]
    assert shorter["error_class"] is not None, ("rank 1 succeeded", shorter)
    for fragment in ("ringcc.MismatchError", "grouped with it", words.get(short, "this rank: a group of")):
        assert fragment in shorter["message"], (fragment, shorter)
    assert shorter["seconds"] < 4, shorter
    longer = records[0]
    assert longer["error_class"] is not None, ("rank 0 succeeded", longer)
    words = {3: "this rank: a group of 3 tensors", 9: "this rank: 9 tensors of float32 packed", 20: "pack 1 of 2"}
    for fragment in ("ringcc.MismatchError", words[long]):
        assert fragment in longer["message"], (fragment, longer)
    assert longer["seconds"] < 4, longer
    for rank in (0, 1):
        assert again[rank]["results"] == long, (rank, again[rank])


def _keras_example(ranks, backend, tmp_name):
    out = ranks.scratch_dir(tmp_name)
    weights = out / "weights.npz"
    completed, _ = _run_job(
        ranks,
        tmp_name,
        2,
        [str(REPO / "examples" / "keras_fit.py"), "--epochs", "2", "--save", str(weights)],
        env={"KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"},
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-6000:]
    return output, weights


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_keras_fit_example_on_every_backend(tf_ready, ranks, backend):
    """examples/keras_fit.py (the seed's Keras recipe) on 2 ranks: the loss
    falls and both ranks end with the same weights, on each backend."""
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    output, weights = _keras_example(ranks, backend, f"keras-{backend}")
    assert "weights identical on all ranks: True" in output, output[-4000:]
    assert f"backend {backend}" in output, output[-4000:]
    assert weights.exists()


def test_gradient_tape_example(tf_ready, ranks):
    completed, _ = _run_job(ranks, "tf-gradient-tape", 2, [str(REPO / "examples" / "tf_gradient_tape.py")])
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-6000:]
    assert "variables identical on all ranks: True" in output, output[-4000:]
