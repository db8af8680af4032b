"""A process's CPU time straight from ``/proc/<pid>/stat``: the oracle real-kernel collector tests compare
the agent's figures with (independent of psutil, which the agent itself uses for host applications)."""

from __future__ import annotations

import os


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (proc(5): fields 14 and 15, after the ``(comm)`` field)."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        text = f.read()
    rest = text[text.rfind(")") + 1 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
