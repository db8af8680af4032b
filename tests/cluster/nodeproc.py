"""A node's own ``/proc/stat`` and ``/proc/meminfo`` when several simulated nodes share one machine (what
lxcfs does for a container): the CPU time and memory of the node's cgroup parent, against the node's
declared capacity. Each agent of the colocation loop reads its node's view (``--proc-root-dir``), so its
NodeMetric says what runs on *its* node, not on the whole machine.

The files keep one length (fixed-width numbers) and are rewritten in place with one ``pwrite``: the agent
keeps a descriptor open and reads from offset 0, so a renamed replacement would never be seen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

USER_HZ = 100
WIDTH = 20


def _n(value: int) -> str:
    return str(max(value, 0)).zfill(WIDTH)


class NodeProcView:
    """``<root>/stat`` and ``<root>/meminfo`` of a node with ``cpus`` CPUs and ``memory`` bytes, whose load
    is ``cpu_ns()`` (cumulative CPU time of its cgroup parent) and ``memory_used()`` (bytes)."""

    def __init__(
        self,
        root: Path,
        cpus: int,
        memory: int,
        *,
        cpu_ns: Callable[[], int | None],
        memory_used: Callable[[], int | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.cpus = cpus
        self.memory = memory
        self._cpu_ns = cpu_ns
        self._memory_used = memory_used
        self._clock = clock
        self._started = clock()
        self._base_ns = cpu_ns() or 0
        self._busy = 0
        self._used = 0
        root.mkdir(parents=True, exist_ok=True)
        self.update()

    def _stat(self) -> str:
        elapsed = int((self._clock() - self._started) * USER_HZ) + 1
        busy = min(self._busy, self.cpus * elapsed)
        lines = [self._cpu_line("cpu", busy, self.cpus * elapsed - busy)]
        for i in range(self.cpus):
            share = busy // self.cpus
            lines.append(self._cpu_line(f"cpu{i}", share, elapsed - share))
        lines += [
            f"intr {_n(0)}",
            f"ctxt {_n(0)}",
            f"btime {_n(int(time.time() - self._clock() + self._started))}",
        ]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _cpu_line(name: str, busy: int, idle: int) -> str:
        # user nice system idle iowait irq softirq steal guest guest_nice
        return (
            f"{name:<5} {_n(busy)} {_n(0)} {_n(0)} {_n(idle)} {_n(0)} {_n(0)} {_n(0)} {_n(0)} {_n(0)} {_n(0)}"
        )

    def _meminfo(self) -> str:
        total = self.memory // 1024
        free = max(total - self._used // 1024, 0)
        rows = (("MemTotal", total), ("MemFree", free), ("MemAvailable", free), ("Buffers", 0), ("Cached", 0))
        return "".join(f"{k + ':':<16}{_n(v)} kB\n" for k, v in rows)

    def update(self) -> None:
        """Read the node's cgroup parent and rewrite both files."""
        ns = self._cpu_ns()
        if ns is not None:
            self._busy = (ns - self._base_ns) * USER_HZ // 1_000_000_000
        used = self._memory_used()
        if used is not None:
            self._used = used
        self._write("stat", self._stat())
        self._write("meminfo", self._meminfo())

    def _write(self, name: str, text: str) -> None:
        data = text.encode()
        fd = os.open(self.root / name, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))  # same length every time: a no-op after the first write
        finally:
            os.close(fd)
