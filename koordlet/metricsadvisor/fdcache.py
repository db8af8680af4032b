"""Cached read-only descriptors for small text files read every tick (``/proc/stat``, PSI, cpusets).

Layer: ``koordlet.metricsadvisor``. ``pread`` at offset 0 on a held descriptor costs about a tenth of an
open/read/close. procfs and cgroupfs regenerate the content on every read
at offset 0, so a held descriptor always shows current values. A cgroup removed under a held descriptor
reads ENODEV, a path gone before open is ENOENT: both mean "gone", the descriptor is closed and forgotten.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from koordlet.system import files

READ_CAP = 65536
"""Enough for /proc/stat of a few hundred CPUs; a fuller buffer is reported as EOVERFLOW."""


class FdCache:
    """``read(path)`` through one cached descriptor per path; thread-safe."""

    def __init__(self, cap: int = READ_CAP) -> None:
        self._cap = cap
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def read(self, path: str | Path, *, prefix: bool = False) -> bytes | None:
        """The file's bytes, ``None`` when it is gone; other ``OSError`` propagate (descriptor kept).

        ``prefix=True`` accepts a full buffer (the caller wants only the start, e.g. /proc/stat's first
        line); otherwise a full buffer is EOVERFLOW, since the tail would be silently lost.
        """
        key = os.fspath(path)
        with self._lock:
            if self._closed:
                return self._read_uncached(key, prefix)
            fd = self._fds.get(key, -1)
            try:
                if fd < 0:
                    fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
                    self._fds[key] = fd
                data = os.pread(fd, self._cap, 0)
            except OSError as err:
                if err.errno not in files.GONE_ERRNOS:
                    raise
                if fd >= 0:
                    self._close_locked(key)
                return None
        if len(data) >= self._cap and not prefix:
            raise OSError(errno.EOVERFLOW, "file larger than the read buffer", key)
        return data

    def _read_uncached(self, key: str, prefix: bool) -> bytes | None:
        """After ``close()``: a collector finishing its last sweep during shutdown holds nothing open."""
        try:
            fd = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            if err.errno in files.GONE_ERRNOS:
                return None
            raise
        try:
            data = os.pread(fd, self._cap, 0)
        finally:
            os.close(fd)
        if len(data) >= self._cap and not prefix:
            raise OSError(errno.EOVERFLOW, "file larger than the read buffer", key)
        return data

    def _close_locked(self, key: str) -> None:
        fd = self._fds.pop(key, -1)
        if fd >= 0:
            os.close(fd)

    def retain(self, paths: Iterable[str | Path]) -> int:
        """Close the descriptors of every path not in ``paths``; returns how many were closed."""
        keep = {os.fspath(p) for p in paths}
        with self._lock:
            doomed = [k for k in self._fds if k not in keep]
            for key in doomed:
                self._close_locked(key)
        return len(doomed)

    def open_fds(self) -> int:
        with self._lock:
            return len(self._fds)

    def close(self) -> None:
        """Close every descriptor; later reads still work but open and close each time."""
        with self._lock:
            self._closed = True
            for key in list(self._fds):
                self._close_locked(key)
