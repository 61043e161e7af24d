"""The `ringcc` logger: the Python side's diagnostics, in the core's format.

Every module logs through `logging.getLogger("ringcc")` or a child of it
("ringcc.torch", "ringcc.mxnet", ...). The level comes from RINGCC_LOG_LEVEL
(else HOROVOD_LOG_LEVEL): trace, debug, info, warning (the default) or error,
read when ringcc is imported. Lines go to stderr as the core writes them,

    [ringcc 2025-11-26T09:14:03.127Z node1 rank 3 pid 4242] WARNING: ...

(time in UTC; "rank R" once the process has joined a job). The logger does not
propagate to the root logger, so a program's own logging configuration shows
each line once; to route ringcc's lines through your own handlers instead:

    logger = logging.getLogger("ringcc")
    logger.handlers.clear()
    logger.propagate = True
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Mapping

LOGGER_NAME = "ringcc"
# Below logging.DEBUG, as the core's trace level is below its debug.
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

_LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
}


def level_from_environment(environ: Mapping[str, str] = os.environ) -> tuple[int, str | None]:
    """(level, problem): the level RINGCC_LOG_LEVEL (else HOROVOD_LOG_LEVEL)
    names, and a message when it names none (the level is then WARNING)."""
    for name in ("RINGCC_LOG_LEVEL", "HOROVOD_LOG_LEVEL"):
        text = environ.get(name, "").strip()
        if text:
            level = _LEVELS.get(text.lower())
            if level is None:
                return logging.WARNING, (
                    f"unknown log level {name}={text!r} (expected trace, debug, info, warning or error); using warning"
                )
            return level, None
    return logging.WARNING, None


def _host(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("RINGCC_HOSTNAME") or socket.gethostname() or "?"


def _rank() -> int | None:
    """This process's rank once it joined a job, else None."""
    core = sys.modules.get("ringcc._core")
    try:
        if core is not None and core.is_initialized():
            return int(core.rank())
    except Exception:  # a missing or shut-down core: no rank to show
        pass
    return None


class Formatter(logging.Formatter):
    """ "[ringcc TIME HOST rank R pid P] LEVEL: message", the core's line format."""

    def __init__(self) -> None:
        super().__init__()
        self._host = _host()

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        millis = int(record.msecs)
        rank = _rank()
        where = f"{self._host} rank {rank}" if rank is not None else self._host
        head = f"[ringcc {stamp}.{millis:03d}Z {where} pid {record.process}] {record.levelname}: "
        text = head + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (as logging.lastResort)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure(environ: Mapping[str, str] = os.environ) -> logging.Logger:
    """Sets up the `ringcc` logger (once; again after `reset()`): level from
    the environment, one stderr handler with the core's format."""
    logger = logging.getLogger(LOGGER_NAME)
    if not getattr(logger, "_ringcc_configured", False):
        level, problem = level_from_environment(environ)
        handler = _StderrHandler()
        handler.setFormatter(Formatter())
        handler.set_name("ringcc")
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
        logger._ringcc_configured = True
        if problem:
            logger.warning(problem)
    return logger


def reset() -> None:
    """Removes what configure() set (tests use it to configure again)."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if handler.get_name() == "ringcc":
            logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    logger._ringcc_configured = False


def get_logger(name: str = LOGGER_NAME) -> logging.Logger:
    """The `ringcc` logger, or one of its children ("ringcc.torch")."""
    configure()
    return logging.getLogger(name)
