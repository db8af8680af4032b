"""Ports of child processes without a race: the child binds port 0 (``--addr=127.0.0.1:0``) and logs the
port the kernel gave it (``serving HTTP on port N``, written by every process at start); the parent reads
it from the child's log.

Choosing a free port in the parent, closing it and handing it to the child is not safe: between the close
and the child's bind another process (a test running beside, a child of another harness) can take it, and
the test then talks to the wrong process or to nobody.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

EPHEMERAL = "127.0.0.1:0"
"""The ``--addr`` to give a child: loopback, any free port."""
_SERVING = re.compile(r"serving HTTP on port (\d+)")


def port_from_log(
    log: Path, proc: subprocess.Popen[Any] | None = None, *, timeout: float = 60.0, after: int = 0
) -> int:
    """The port the child logging to ``log`` announced (looking past the first ``after`` bytes); raises
    when the child exits first or ``timeout`` passes, with the log's tail."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")[after:] if log.exists() else ""
        found = _SERVING.search(text)
        if found:
            return int(found.group(1))
        if proc is not None and proc.poll() is not None:
            code = proc.returncode
            raise RuntimeError(f"{log.name}: the process exited ({code}) before serving:\n{text[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{log.name}: no 'serving HTTP on port' in {timeout:.0f}s:\n{text[-3000:]}")
        time.sleep(0.05)
