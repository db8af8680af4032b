"""How many descriptors this test process holds open on files under a directory (a FakeHost tree)."""

from __future__ import annotations

import os
from pathlib import Path


def open_fds_under(root: Path) -> int:
    """Descriptors of this process whose target lies below ``root`` (read from ``/proc/self/fd``)."""
    base = str(root.resolve()) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the descriptor listdir itself used, closed since
        count += target.startswith(base)
    return count
