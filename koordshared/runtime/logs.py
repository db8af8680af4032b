"""Logging set-up with klog-like verbosity (``-v``) and an optional JSON line format.

``-v 0..3`` logs INFO and above, ``-v 4`` and more adds DEBUG (koordlet's V(4) per-component detail),
``-v 5`` adds per-tick detail from the ``koordlet.tick`` loggers.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import OrderedDict
from typing import TextIO


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg (+ exc when present)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "thread": record.threadName,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def level_for(verbosity: int) -> int:
    return logging.DEBUG if verbosity >= 4 else logging.INFO


def setup(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    """Configure the root logger once (idempotent: replaces our previous handler)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_koordlet", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._koordlet = True  # type: ignore[attr-defined]
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(
            logging.Formatter(
                "%(levelname).1s%(asctime)s %(threadName)s %(name)s] %(message)s", "%m%d %H:%M:%S"
            )
        )
    root.addHandler(handler)
    root.setLevel(level_for(verbosity))
    logging.getLogger("koordlet.tick").setLevel(logging.DEBUG if verbosity >= 5 else logging.INFO)
    for noisy in ("urllib3", "kubernetes", "pyroute2"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbosity < 6 else logging.DEBUG)


class OncePerChange:
    """Warns about a subject (a pod, a file) when what is wrong with it changes, not at every look.

    Inputs re-read every few seconds (pod lists, NodeSLOs, cgroup files) would otherwise repeat the same
    warning forever; repeats go to DEBUG. Bounded: the least recently warned subjects are forgotten
    first, so a flood of bad objects cannot grow it."""

    def __init__(self, logger: logging.Logger, subjects: int = 4096) -> None:
        self._log = logger
        self._subjects = subjects
        self._last: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def warning(self, subject: str, message: str) -> None:
        with self._lock:
            first = self._last.get(subject) != message
            self._last[subject] = message
            self._last.move_to_end(subject)
            while len(self._last) > self._subjects:
                self._last.popitem(last=False)
        self._log.log(logging.WARNING if first else logging.DEBUG, "%s", message)

    def forget(self, subject: str) -> None:
        """The subject is fine again: its next problem is news."""
        with self._lock:
            self._last.pop(subject, None)
