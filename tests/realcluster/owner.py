"""The node's owner record: which cluster made the machine-wide things a node needs (the pods' bridge,
the ``kubepods`` cgroups, the kubelet's host directories) and which process started it.

A run killed with its session (the processes gone, the kernel and disk kept) leaves those things behind,
and the next start must tell them from a live cluster's: the record names the state directory whose
``cluster.json`` lists the processes, and the starting process covers the moments before the first of
them is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tests.realcluster.procs import start_ticks

RECORD = Path("/run/koordlet-real-cluster.json")


@dataclass(frozen=True, slots=True)
class Owner:
    state: Path
    pid: int
    """The process that ran the start (``up``, a bench, the tier's fixture)."""
    ticks: int

    def starter_alive(self) -> bool:
        return start_ticks(self.pid) == self.ticks


def claim(state: Path) -> None:
    """Record this process's cluster in ``state`` as the node's owner, before it makes anything."""
    pid = os.getpid()
    RECORD.write_text(json.dumps({"state": str(state), "pid": pid, "ticks": start_ticks(pid)}))


def recorded() -> Owner | None:
    """The recorded owner (None: no record, or one this code cannot read, which names nobody alive)."""
    try:
        doc = json.loads(RECORD.read_text())
        return Owner(Path(doc["state"]), int(doc["pid"]), int(doc["ticks"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def release(state: Path) -> None:
    """Drop the record if it still names ``state`` (a later cluster's record is not this stop's)."""
    owner = recorded()
    if owner is None or owner.state == state:
        with contextlib.suppress(FileNotFoundError):
            RECORD.unlink()
