"""Unbuffered reads of cgroup and resctrl files for the executor, with "gone" as a value, not an error.

Layer: ``koordlet.resourceexecutor``. Writes go through ``koordlet.system.native`` (C or ``os.write``).
"""

from __future__ import annotations

import errno
import os

GONE_ERRNOS = frozenset({errno.ENOENT, errno.ENODEV})
"""ENOENT: the cgroup dir is gone; ENODEV: it was removed while a descriptor was held."""
READ_CAP = 65536


def read_text(path: os.PathLike[str] | str) -> str | None:
    """The file's text, or ``None`` when its cgroup is gone; other errors raise ``OSError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        # ENOTDIR: a path component is now a plain file (only seen on fake trees, same meaning)
        if err.errno in GONE_ERRNOS or err.errno == errno.ENOTDIR:
            return None
        raise
    try:
        return os.read(fd, READ_CAP).decode(errors="replace")
    except OSError as err:
        if err.errno in GONE_ERRNOS:
            return None
        raise
    finally:
        os.close(fd)
