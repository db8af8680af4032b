"""Reading small kernel files (cgroupfs, resctrl, sysfs): one reader and one notion of "gone".

Layer: ``koordlet.system``. Every read opens with ``O_NOFOLLOW``, so a symlink planted as the last
component is refused (``ELOOP``) rather than followed out of the tree. :data:`GONE_ERRNOS` are the errnos
that mean the file's cgroup (or the process a write was about) no longer exists: a skipped sample or
write, never a failure.
"""

from __future__ import annotations

import errno
import os

GONE_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ESRCH})
"""ENOENT/ENOTDIR: the path went away before the open; ENODEV: the descriptor outlived its cgroup (rmdir
while open); ESRCH: pseudo files of a dead cgroup, and a write naming a process that exited."""

_CHUNK = 65536


def read_text(path: os.PathLike[str] | str) -> str:
    """The whole file; ``OSError`` as the kernel gives it (``ELOOP`` for a symlink)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_text_unless_gone(path: os.PathLike[str] | str) -> str | None:
    """:func:`read_text`, or ``None`` when the file's cgroup is gone (:data:`GONE_ERRNOS`)."""
    try:
        return read_text(path)
    except OSError as err:
        if err.errno in GONE_ERRNOS:
            return None
        raise
