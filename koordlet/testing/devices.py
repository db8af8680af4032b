"""Block devices for real-kernel tests and benchmarks (root, ``losetup``): a loop device over a sparse
file, detached afterwards whatever happens."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def loop_device(directory: Path, size: int = 64 << 20) -> Iterator[str]:
    """``/dev/loopN`` backed by a sparse ``size``-byte file made in ``directory``."""
    backing = directory / f"loop-{size}.img"
    with open(backing, "wb") as f:
        f.truncate(size)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)
        backing.unlink(missing_ok=True)
