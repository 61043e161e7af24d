"""Variables and objects in `ringcc.tensorflow`: broadcast_variables (and
TF1's broadcast_global_variables), broadcast_object and allgather_object
(pickles, _objects.py)."""

from __future__ import annotations

import tensorflow as tf

from ringcc.tensorflow import _objects, _ops
from ringcc.tensorflow.basics import require_init
from ringcc.tensorflow.collectives import broadcast
from ringcc.tensorflow.process_sets import global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to every variable: one broadcast op per
    variable, named by its place in the list (every rank passes its
    variables in the same order). Returns the grouped assign op."""
    require_init()
    variables = list(variables)
    if not variables:
        return tf.no_op() if not tf.executing_eagerly() else None
    base = _ops.generated_name("broadcast_variables") if tf.executing_eagerly() else None
    assigns = []
    for i, v in enumerate(variables):
        value = broadcast(v, root_rank, name=None if base is None else f"{base}.{i}", process_set=process_set)
        assigns.append(v.assign(value))
    if tf.executing_eagerly():
        return None
    return tf.group(*assigns)


def broadcast_global_variables(root_rank):
    """TF1 graphs' global variables (tf.compat.v1), broadcast from root_rank."""
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's `obj` (pickled, authenticated with the job's key) on every
    rank. Eager code."""
    require_init()
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's `obj` in rank order. Eager code."""
    require_init()
    return _objects.allgather_object(obj, name, process_set)
