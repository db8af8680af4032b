"""A tiny inotify wrapper (ctypes on libc, stdlib only) for the pod lifecycle event generator (PLEG).

Only what the PLEG and the runtime hooks' guard need: watch directories for ``IN_CREATE``/``IN_DELETE``
(or ``IN_MODIFY``), wait for events with a timeout (``poll``, so a stop flag is honoured), and decode them.
cgroupfs reports ``mkdir``/``rmdir`` of child cgroups as ``IN_CREATE|IN_ISDIR`` / ``IN_DELETE|IN_ISDIR``,
and every ``write(2)`` to a cgroup file as ``IN_MODIFY`` on its directory (the VFS raises it for any
file); cgroup2 does the same.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import threading
from collections.abc import KeysView
from dataclasses import dataclass
from pathlib import Path

IN_MODIFY = 0x00000002
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_ONLYDIR = 0x01000000
IN_IGNORED = 0x00008000
IN_Q_OVERFLOW = 0x00004000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class InotifyEvent:
    """One event: the watched directory, the child name (may be empty) and the kernel mask."""

    directory: Path
    name: str
    mask: int

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)

    @property
    def overflow(self) -> bool:
        """The kernel queue overflowed: events were lost, the caller should rescan."""
        return bool(self.mask & IN_Q_OVERFLOW)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class Inotify:
    """An inotify instance; close it (or use ``with``) to release the fd and every watch."""

    def __init__(self) -> None:
        self._libc = _libc()
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), "inotify_init1")
        self._fd: int = fd
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._wake_lock = threading.Lock()
        """:meth:`wake` comes from other threads: it must never write to a descriptor number that
        :meth:`close` released and the process has since given to another file."""
        self._dirs: dict[int, Path] = {}
        self._wds: dict[Path, int] = {}

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def watched(self) -> KeysView[Path]:
        """The watched directories, a live view (``in`` and ``len`` are O(1))."""
        return self._wds.keys()

    def add_watch(self, directory: Path, mask: int = IN_CREATE | IN_DELETE) -> int:
        """Watch ``directory`` (must be a directory; ``OSError`` otherwise, e.g. ENOENT)."""
        wd = self._libc.inotify_add_watch(
            self._fd, os.fsencode(directory), ctypes.c_uint32(mask | IN_ONLYDIR)
        )
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
        self._dirs[wd] = directory
        self._wds[directory] = wd
        return int(wd)

    def remove_watch(self, directory: Path) -> None:
        """Stop watching ``directory`` (a no-op when it is not watched or already gone)."""
        wd = self._wds.pop(directory, None)
        if wd is None:
            return
        self._dirs.pop(wd, None)
        self._libc.inotify_rm_watch(self._fd, ctypes.c_int(wd))  # EINVAL when the dir is gone: fine

    def read(self, timeout: float) -> list[InotifyEvent]:
        """Events available within ``timeout`` seconds (``[]`` on timeout)."""
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_fd, select.POLLIN)
        ready = {fd for fd, _ev in poller.poll(max(int(timeout * 1000), 0))}
        if self._wake_fd in ready:
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(self._wake_fd)
        if self._fd not in ready:
            return []
        try:
            data = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return []
        except OSError as err:
            if err.errno == errno.EINTR:
                return []
            raise
        return self._decode(data)

    def _decode(self, data: bytes) -> list[InotifyEvent]:
        events: list[InotifyEvent] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            raw_name = data[offset : offset + length].rstrip(b"\0")
            offset += length
            directory = self._dirs.get(wd, Path())
            if mask & IN_IGNORED:
                # The watched directory is gone: forget the watch so it can be added again later.
                gone = self._dirs.pop(wd, None)
                if gone is not None:
                    self._wds.pop(gone, None)
            events.append(InotifyEvent(directory, os.fsdecode(raw_name), mask))
        return events

    def wake(self) -> None:
        """End a :meth:`read` waiting in another thread now (it returns ``[]`` unless events came), so
        a reader can sleep long and still stop at once (polling for stop every half second)."""
        with self._wake_lock:
            if self._wake_fd >= 0:  # closed: nobody waits on it
                os.eventfd_write(self._wake_fd, 1)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            with self._wake_lock:
                os.close(self._wake_fd)
                self._wake_fd = -1
            self._dirs.clear()
            self._wds.clear()


def open_or_fallback(log: logging.Logger, who: str, instead: str) -> Inotify | None:
    """A new instance, or ``None`` after one warning naming ``who`` and what it does ``instead`` when the
    kernel has none left (``fs.inotify.max_user_instances``): every watcher of the agent has a slower
    path that stays correct, and a thread dying here would stop the agent."""
    try:
        return Inotify()
    except OSError as err:
        log.warning("%s: no inotify (%s); %s", who, err, instead)
        return None
