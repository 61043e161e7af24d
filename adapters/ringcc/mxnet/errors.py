"""ringcc's errors as MXNet errors.

Horovod's MXNet users catch `(MXNetError, RuntimeError)`. Every ringcc
error that ringcc.mxnet raises, at the call or from MXNet's engine at the
first wait on a failed operation's result (`wait_to_read()`, `asnumpy()`,
`mx.nd.waitall()`), is an instance of a class that derives from both the
ringcc error (`ringcc.MismatchError`, `ringcc.PeerFailureError`, ...) and
`mxnet.base.MXNetError` (a RuntimeError), so both

    except MXNetError:                 # Horovod's way
    except ringcc.MismatchError:       # ringcc's way

catch it. Errors that are not ringcc's (a TypeError about an argument, a
ValueError for a 0-dim reducescatter as in Horovod) keep their classes.

How an error raised inside MXNet's engine gets its class: a failed
operation completes with a C++ `dmlc::Error` whose message starts with
`ringcc.<Class>: ` (engine_message()); MXNet's engine keeps it on the
operation's outputs and, when something waits on them, MXNet's Python makes
the exception registered under that prefix (`mxnet.base.register_error`),
here an instance of the combined class with the message after the prefix.
"""

from __future__ import annotations

import functools

from mxnet.base import MXNetError, register_error

import ringcc

__all__ = ["as_mxnet_error", "engine_message", "mxnet_class", "mxnet_errors"]

_combined: dict[type, type] = {}


def _prefix(cls: type) -> str:
    return f"ringcc.{cls.__name__}: "


def mxnet_class(cls: type) -> type:
    """The class deriving from the ringcc error class `cls` and MXNetError
    (named as `cls`, in module ringcc.mxnet), registered with MXNet's error
    registry under `ringcc.<name>`."""
    found = _combined.get(cls)
    if found is None:
        found = type(cls.__name__, (cls, MXNetError), {"__module__": "ringcc.mxnet", "__doc__": cls.__doc__})
        _combined[cls] = found
        prefix = _prefix(cls)

        def make(message: str, found=found, prefix=prefix):
            return found(message[len(prefix) :] if message.startswith(prefix) else message)

        register_error(prefix[:-2], make)
    return found


def _ringcc_classes():
    """ringcc's error classes: RingccError and those derived from it that
    ringcc exports (not the combined classes of its adapters)."""
    seen, todo = [], [ringcc.RingccError]
    while todo:
        cls = todo.pop()
        if cls not in seen and getattr(ringcc, cls.__name__, None) is cls:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return seen


for _cls in _ringcc_classes():  # registered now: the engine may raise any of them
    mxnet_class(_cls)


def as_mxnet_error(error: BaseException) -> BaseException:
    """`error` as an instance of its MXNet class when it is a ringcc error
    (the original as its __cause__); anything else as it is."""
    if not isinstance(error, ringcc.RingccError) or isinstance(error, MXNetError):
        return error
    mapped = mxnet_class(type(error))(*error.args)
    mapped.__cause__ = error
    return mapped


def engine_message(error: BaseException) -> str:
    """The message of the dmlc::Error that carries `error` through MXNet's
    engine: the prefix that makes MXNet's Python raise it as its MXNet class."""
    text = str(error.args[0]) if len(error.args) == 1 else str(error)
    for cls in type(error).__mro__:
        if cls in _combined:  # the ringcc class (of a combined class too)
            return _prefix(cls) + text
    # Not a ringcc error (e.g. an internal error of the adapter): MXNet's
    # Python raises it as MXNetError, its class named in the message.
    return f"{type(error).__name__} in ringcc.mxnet: {text}"


def mxnet_errors(function):
    """Decorates a public function: the ringcc errors it raises come as
    their MXNet classes."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ringcc.RingccError as error:
            mapped = as_mxnet_error(error)
            if mapped is error:
                raise
            raise mapped from error

    return wrapper
