"""The C allocator's settings for a long-running, many-threaded agent (glibc; a no-op elsewhere).

Why: Python's small objects live in its own arenas, but arrays, strings and buffers over 512
bytes come from ``malloc``. glibc gives each thread that allocates its own arena (up to eight per CPU),
and keeps what is freed in each for reuse; its threshold for serving a large block from its own
``mmap`` grows every time such a block is freed, so after the first few checkpoints and renders even
multi-MiB buffers came from the heaps and their space stayed resident. The agent's twenty-odd threads
(one per collector and strategy) made that a good part of its memory. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 128 * 1024
TRIM_THRESHOLD = 1024 * 1024
TRIM_INTERVAL = 60.0
"""Seconds between :func:`trim` calls (a trim of a 100 MiB heap takes a few milliseconds)."""

_libc: ctypes.CDLL | None = None


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name or "libc.so.6")
            libc.mallopt  # noqa: B018  (both exist on glibc; a missing one is AttributeError)
            libc.malloc_trim  # noqa: B018
        except (OSError, AttributeError):
            return None
        _libc = libc
    return _libc


def tune() -> bool:
    """Apply the settings above; ``False`` when this C library is not glibc. Call before threads start."""
    libc = _glibc()
    if libc is None:
        log.info("malloc: not glibc, allocator left as it is")
        return False
    ok = all(
        libc.mallopt(param, value) == 1
        for param, value in (
            (M_ARENA_MAX, ARENAS),
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        )
    )
    if not ok:
        log.warning("malloc: glibc refused a setting; allocator partly tuned")
    return ok


def trim() -> None:
    """Give the free memory of the C heaps back to the kernel (glibc ``malloc_trim(0)``)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
