"""The machine's real-cluster lock: one real cluster per machine (the kubelet's cgroups, the node's
devices), taken by the real test tier and the benches that bring a cluster up alike."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "koordlet-real-cluster.lock"


@dataclass(frozen=True, slots=True)
class Verdict:
    held: bool
    """Whether this process holds the lock (False: another holder outlasted the wait)."""
    why: str = ""
    """Why the machine still cannot run a cluster (``ready``'s last answer; empty: it can)."""

    @property
    def busy(self) -> str:
        """Why the machine is not ours (empty: it is)."""
        return self.why if self.held else "another real cluster held this machine for the whole wait"


@contextlib.contextmanager
def machine_lock(
    wait: float, ready: Callable[[], str], say: Callable[[str], None] = print
) -> Iterator[Verdict]:
    """Take the lock, waiting up to ``wait`` seconds for another holder and, once taken, for a cluster
    started without it (``ready`` says why the machine is not free) to stop: the lock is let go while
    waiting for that, so the cluster's own stop is not held up."""
    deadline = time.monotonic() + wait
    fd = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    yield Verdict(held=False)
                    return
                if not told:
                    say(f"waiting up to {wait:.0f} s for the machine's real-cluster lock")
                    told = True
                time.sleep(5)
                continue
            why = ready()
            if not why or time.monotonic() > deadline:
                yield Verdict(held=True, why=why)
                return
            fcntl.flock(fd, fcntl.LOCK_UN)
            time.sleep(5)
    finally:
        os.close(fd)
