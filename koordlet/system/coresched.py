"""Linux core scheduling (``prctl(PR_SCHED_CORE, ...)``, kernel >= 5.14 with ``CONFIG_SCHED_CORE``):
processes with the same cookie may share an SMT core, processes with different cookies never run on
sibling threads at the same time. koordlet's ``util/system/core_sched.go``.

:class:`KernelSchedCore` calls the kernel; :func:`probe` says why it cannot (``None`` when it can). The
share operations act on the calling thread, so callers keep them on one thread of their own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
from typing import Protocol

PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PR_SCHED_CORE_CREATE = 1
PR_SCHED_CORE_SHARE_TO = 2
PR_SCHED_CORE_SHARE_FROM = 3
PIDTYPE_PID = 0
PIDTYPE_TGID = 1


class SchedCore(Protocol):
    """The core-scheduling operations the agent uses; every one raises ``OSError`` on failure."""

    def get(self, pid: int) -> int:
        """The cookie of ``pid`` (0: none)."""
        ...

    def create(self, pid: int) -> None:
        """A new cookie for ``pid``'s whole thread group."""
        ...

    def share_from(self, pid: int) -> None:
        """The calling thread takes ``pid``'s cookie."""
        ...

    def share_to(self, pid: int) -> None:
        """``pid``'s thread group takes the calling thread's cookie."""
        ...


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class KernelSchedCore:
    def _prctl(self, op: int, pid: int, pid_type: int, arg: object = 0) -> None:
        if _libc().prctl(PR_SCHED_CORE, op, pid, pid_type, arg) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), f"prctl(PR_SCHED_CORE, {op}, {pid})")

    def get(self, pid: int) -> int:
        cookie = ctypes.c_ulong(0)
        self._prctl(PR_SCHED_CORE_GET, pid, PIDTYPE_PID, ctypes.byref(cookie))
        return int(cookie.value)

    def create(self, pid: int) -> None:
        self._prctl(PR_SCHED_CORE_CREATE, pid, PIDTYPE_TGID)

    def share_from(self, pid: int) -> None:
        self._prctl(PR_SCHED_CORE_SHARE_FROM, pid, PIDTYPE_PID)

    def share_to(self, pid: int) -> None:
        self._prctl(PR_SCHED_CORE_SHARE_TO, pid, PIDTYPE_TGID)


def probe(ops: SchedCore | None = None) -> str | None:
    """``None`` when this kernel does core scheduling; otherwise why not, in one line."""
    try:
        (ops or KernelSchedCore()).get(os.getpid())
    except OSError as err:
        if err.errno == errno.EINVAL:
            return "no core scheduling in this kernel (PR_SCHED_CORE: EINVAL; 5.14+, CONFIG_SCHED_CORE)"
        return f"core scheduling unavailable: {err}"
    return None
