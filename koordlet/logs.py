"""Logging set-up with klog-like verbosity (``-v``) and an optional JSON line format.

``-v 0..3`` logs INFO and above, ``-v 4`` and more adds DEBUG (koordlet's V(4) per-component detail),
``-v 5`` adds per-tick detail from the ``koordlet.tick`` loggers.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
