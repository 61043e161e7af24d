"""One rank of ringcc.run (ringcc/func_run.py): `python -m ringcc.func_rank DIR`
loads the pickled (function, args, kwargs) from DIR, calls it, and leaves
what came of it in DIR/rank.N.result, a file only this user can read (DIR
is the driver's private directory); when RINGCC_RUN_DRIVER is set (some
ranks run on other hosts) the call and the result travel over the network
instead (ringcc/func_channel.py). The outcome: ("ok", value), or ("error", record)
with the exception's type, message, traceback, when it happened and, when
it pickles, the exception itself. An exception is raised again once
recorded, so that ringcc aborts the job and the other ranks fail at once,
naming this one. Only the standard library here (cloudpickle when
installed, and the channel, itself of the standard library): the function
imports what it needs."""

from __future__ import annotations

import os
import pickle
import sys
import time
import traceback

from ringcc.func_channel import DRIVER_VARIABLE, fetch_function, send_outcome

FUNCTION_FILE = "function.pkl"

# Where a rank learns its rank: ringrun's variables, else MPI launchers'.
RANK_VARIABLES = ("RINGCC_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


def result_path(job_dir: str, rank: int) -> str:
    return os.path.join(job_dir, f"rank.{rank}.result")


def dumps(value) -> bytes:
    """cloudpickle when installed (its output loads with plain pickle), else pickle."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(value)
    return cloudpickle.dumps(value)


def this_rank(environ=os.environ) -> int:
    for name in RANK_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    raise RuntimeError(f"ringcc.func_rank runs under ringcc.run, which sets the rank ({', '.join(RANK_VARIABLES)})")


def failure_record(error: BaseException, stage: str) -> dict:
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    try:
        pickled = dumps(error)
        pickle.loads(pickled)  # an exception that pickles but cannot load would fail the driver
    except Exception:  # noqa: BLE001 - the record says enough without it
        pickled = None
    return {
        "type": name,
        "message": str(error),
        "traceback": "".join(traceback.format_exception(kind, error, error.__traceback__)),
        "stage": stage,
        "time": time.time(),
        # Failures that are another rank's doing (ringcc's PeerFailureError,
        # or this rank being stopped after one) count after the others.
        "consequence": any(c.__name__ == "PeerFailureError" for c in kind.__mro__)
        or isinstance(error, (SystemExit, KeyboardInterrupt)),
        "exception": pickled,
    }


def write_result(job_dir: str, rank: int, outcome: tuple) -> None:
    """Hands `outcome` to the driver: over the network when ringcc.run
    serves the ranks that way (ringcc/func_channel.py), else written whole
    to DIR (a temporary name, then renamed), readable by this user only."""
    data = pickle.dumps(outcome) if outcome[0] == "error" else dumps(outcome)
    driver = os.environ.get(DRIVER_VARIABLE)
    if driver:
        send_outcome(driver, os.environ.get("RINGCC_SECRET", ""), rank, data)
        return
    path = result_path(job_dir, rank)
    partial = f"{path}.{os.getpid()}.partial"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    os.replace(partial, path)


def load_call(job_dir: str):
    """The pickled (function, args, kwargs): from the driver over the
    network, or from DIR."""
    driver = os.environ.get(DRIVER_VARIABLE)
    if driver:
        return pickle.loads(fetch_function(driver, os.environ.get("RINGCC_SECRET", "")))
    with open(os.path.join(job_dir, FUNCTION_FILE), "rb") as file:
        return pickle.load(file)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m ringcc.func_rank DIR (ringcc.run starts it)", file=sys.stderr)
        return 2
    job_dir = argv[1]
    rank = this_rank()
    try:
        function, args, kwargs = load_call(job_dir)
    except Exception as error:  # noqa: BLE001 - reported to the driver, which raises it
        write_result(job_dir, rank, ("error", failure_record(error, "loading the function")))
        raise
    try:
        value = function(*args, **kwargs)
    except BaseException as error:
        write_result(job_dir, rank, ("error", failure_record(error, "running the function")))
        raise  # ringcc aborts the job: the other ranks fail now, naming this one
    try:
        write_result(job_dir, rank, ("ok", value))
    except Exception as error:  # noqa: BLE001 - an unpicklable result
        write_result(job_dir, rank, ("error", failure_record(error, "pickling the function's result")))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
