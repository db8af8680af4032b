"""Crash-safe whole-file writes for the agent's own state (metric checkpoint, standalone NodeMetric).

Readers see the old file or the new one, never a torn one: the data goes to a temp file in the same
directory, is fsync'd, renamed over the target, and the directory is fsync'd, because the rename is durable
only once the directory entry itself reaches the disk. Not for cgroup files: those go through the executor.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from pathlib import Path

_WRITE_BUFFER = 1 << 20
"""Chunks are coalesced up to this many bytes per ``write`` (a checkpoint is thousands of small arrays)."""


def temp_name(path: Path) -> Path:
    """The temp file a writer of ``path`` uses (``<name>.tmp.<pid>``)."""
    return path.with_name(f"{path.name}.tmp.{os.getpid()}")


def remove_stale_temps(path: Path) -> None:
    """Delete temp files of ``path`` left by a writer that was killed mid-write."""
    for stale in path.parent.glob(f"{path.name}.tmp.*"):
        try:
            stale.unlink()
        except OSError:
            pass


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"short write ({written})")
        view = view[written:]


def write_atomic(
    path: Path, chunks: Iterable[bytes | bytearray | memoryview | array[float]], mode: int = 0o644
) -> int:
    """Write the concatenated ``chunks`` to ``path`` crash-safely; returns the bytes written.

    ``chunks`` may be any buffers (``bytes``, ``array('d')`` through ``memoryview``...). The temp file is
    opened with ``O_NOFOLLOW`` and removed again when anything fails; the error is raised.
    """
    tmp = temp_name(path)
    total = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    try:
        buf = bytearray()
        for chunk in chunks:
            buf += chunk
            if len(buf) >= _WRITE_BUFFER:
                _write_all(fd, buf)
                total += len(buf)
                buf.clear()
        _write_all(fd, buf)
        total += len(buf)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return total
