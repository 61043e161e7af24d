"""A job whose ranks hand a grouped collective groups of different lengths
(tests/frameworks/tensorflow/test_tensorflow.py): rank 0 three tensors,
rank 1 two, of the same shape, so that each collective the two share
agrees on its own tensor. The shorter rank must fail at once with a
MismatchError about the group (not succeed with whichever tensors share a
position); the longer one fails at once too, its third collective failed
by the shorter rank's kernel. Then both run the same call again, their
groups agreeing: nothing of the failed one may be left in flight. Each
rank records what it got in $RINGCC_TF_OUT/rank<r>.json. The arguments
say which collective ("allreduce", "allgather", "reducescatter"), how it
runs ("eager", "graph", or "session": a TF1 graph run by a session) and, optionally, the lengths of rank 1's group
(2 by default; 1: a group of one) and of rank 0's (3 by default; 8 or
more tensors travel packed: see the test for the packs each layout makes).
The call that follows gives both ranks rank 0's group."""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import ringcc.tensorflow as hvd  # noqa: E402

hvd.init()
kind, how = sys.argv[1], sys.argv[2]
short = int(sys.argv[3]) if len(sys.argv) > 3 else 2
long = int(sys.argv[4]) if len(sys.argv) > 4 else 3
tensors = [tf.ones([4])] * (long if hvd.rank() == 0 else short)
record = {}
collective = {
    "allreduce": hvd.grouped_allreduce,
    "allgather": hvd.grouped_allgather,
    "reducescatter": hvd.grouped_reducescatter,
}[kind]


def in_session(name):
    # A TF1 graph run by a session: no automatic control dependencies.
    def run():
        graph = tf.Graph()
        with graph.as_default():
            outs = collective([tf.ones(t.shape) for t in tensors], name=name)
            with tf.compat.v1.Session(graph=graph) as session:
                return session.run(outs)

    return run


call = {
    "eager": lambda: collective(tensors, name="uneven"),
    "graph": tf.function(lambda: collective(tensors, name="uneven.graph")),
    "session": in_session("uneven.session"),
}[how]
start = time.monotonic()
try:
    call()
    record[how] = {"error_class": None, "message": "", "seconds": time.monotonic() - start}
except Exception as error:  # noqa: BLE001 - recorded
    record[how] = {"error_class": type(error).__name__, "message": str(error), "seconds": time.monotonic() - start}
tensors = [tf.ones([4])] * long
again = {
    "eager": lambda: collective(tensors, name="uneven"),
    "graph": tf.function(lambda: collective(tensors, name="uneven.graph")),
    "session": in_session("uneven.session"),
}[how]
try:
    record["again"] = {"results": len(again()), "error": ""}
except Exception as error:  # noqa: BLE001 - recorded
    record["again"] = {"results": 0, "error": f"{type(error).__name__}: {error}"}
with open(os.path.join(os.environ["RINGCC_TF_OUT"], f"rank{hvd.rank()}.json"), "w") as f:
    json.dump(record, f)
