"""The only importer of the cffi module ``koordlet.system._native``: typed wrappers, nothing cffi leaks out.

Layer: ``koordlet.system``. When the compiled module is absent (no compiler at install time),
``HAS_NATIVE`` is False and every function here falls back to pure Python with the same results
(``batchread.PyBatchReader``, ``os.open``/``os.write``); ``force_python=True`` picks the fallback on purpose.
"""

from __future__ import annotations

import errno
import importlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from koordlet.system import batchread
from koordlet.system.batchread import DEFAULT_BUFSIZE, FileKind, Layout, ReadResults

_native: Any
try:
    # imported by name so mypy does not need stubs for the generated module
    _native = importlib.import_module("koordlet.system._native")
    HAS_NATIVE = True
except ImportError:  # pragma: no cover - exercised by the fallback test in a subprocess
    _native = None
    HAS_NATIVE = False

SCHEMATA_MSG_CAP = 4096
"""``info/last_cmd_status`` is one short line ("Mask out of range"); a page is plenty."""


class NativeBatchReader:
    """The C batch reader (see ``csrc/koordlet_native.h``); same interface as ``PyBatchReader``."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        kinds: Sequence[FileKind],
        keys: Sequence[Sequence[str]],
        *,
        bufsize: int = DEFAULT_BUFSIZE,
    ) -> None:
        if _native is None:
            raise RuntimeError("the compiled module koordlet.system._native is not available")
        ffi, lib = _native.ffi, _native.lib
        if int(lib.kn_missing()) != batchread.MISSING:
            raise RuntimeError("C and Python disagree on the missing-key sentinel")
        self.layout = Layout.build(paths, kinds, keys)
        n = len(self.layout.paths)
        handle = lib.kn_reader_new(n, bufsize)
        if handle == ffi.NULL:
            raise MemoryError("kn_reader_new failed")
        self._handle: Any = ffi.gc(handle, lib.kn_reader_free)
        for path, kind, file_keys in zip(self.layout.paths, self.layout.kinds, self.layout.keys, strict=True):
            blob = b"".join(k.encode() + b"\0" for k in file_keys)
            rc = int(
                lib.kn_reader_add(self._handle, path.encode(), int(kind), blob, len(blob), len(file_keys))
            )
            if rc < 0:
                raise OSError(-rc, os.strerror(-rc), path)
        if int(lib.kn_reader_slots(self._handle)) != self.layout.slots:
            raise RuntimeError("C and Python disagree on the slot layout")
        self._n = n
        self._values: Any = ffi.new("int64_t[]", max(1, self.layout.slots))
        self._status: Any = ffi.new("int[]", max(1, n))
        self._cap = n
        self._lock = threading.Lock()
        self._closed = False

    def _check(self, rc: int, what: str) -> None:
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc), what)

    def swap(self, i: int, j: int) -> None:
        with self._lock:
            layout = self.layout.swapped(i, j)
            self._check(int(_native.lib.kn_reader_swap(self._handle, i, j)), "kn_reader_swap")
            self.layout = layout

    def truncate(self, n: int) -> None:
        with self._lock:
            layout = self.layout.truncated(n)
            self._check(int(_native.lib.kn_reader_truncate(self._handle, n)), "kn_reader_truncate")
            self.layout, self._n = layout, n

    def extend(
        self, paths: Sequence[str | Path], kinds: Sequence[FileKind], keys: Sequence[Sequence[str]]
    ) -> None:
        ffi, lib = _native.ffi, _native.lib
        with self._lock:
            layout = self.layout.extended(paths, kinds, keys)
            n = len(layout.paths)
            if n > self._cap:
                cap = max(n, 2 * self._cap)  # amortised: a growing pod count does not realloc each time
                self._check(int(lib.kn_reader_reserve(self._handle, cap)), "kn_reader_reserve")
                self._cap = cap
            for i in range(self._n, n):
                blob = b"".join(k.encode() + b"\0" for k in layout.keys[i])
                path = layout.paths[i]
                rc = int(
                    lib.kn_reader_add(
                        self._handle,
                        path.encode(),
                        int(layout.kinds[i]),
                        blob,
                        len(blob),
                        len(layout.keys[i]),
                    )
                )
                if rc < 0:
                    lib.kn_reader_truncate(self._handle, self._n)
                    raise OSError(-rc, os.strerror(-rc), path)
            self.layout, self._n = layout, n
            # buffers for as many values as the capacity can hold without asking again
            if len(self._status) < n:
                self._status = ffi.new("int[]", self._cap)
            if len(self._values) < layout.slots:
                per_file = -(-layout.slots // max(1, n))
                self._values = ffi.new("int64_t[]", max(layout.slots, per_file * self._cap))

    def read(self) -> ReadResults:
        ffi, lib = _native.ffi, _native.lib
        with self._lock:
            if self._closed:
                raise ValueError("read from a closed batch reader")
            lib.kn_reader_read(self._handle, self._values, self._status)
            status: list[int] = ffi.unpack(self._status, self._n)
            values: list[int] = ffi.unpack(self._values, self.layout.slots)
        return ReadResults(self.layout, status, values)

    def open_fds(self) -> int:
        with self._lock:
            return 0 if self._closed else int(_native.lib.kn_reader_open_fds(self._handle))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                _native.ffi.release(self._handle)

    def __enter__(self) -> NativeBatchReader:
        return self

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()


def open_batch_reader(
    paths: Sequence[str | Path],
    kinds: Sequence[FileKind],
    keys: Sequence[Sequence[str]],
    *,
    force_python: bool = False,
    bufsize: int = DEFAULT_BUFSIZE,
) -> batchread.BatchReader:
    """The C reader when built (and not ``force_python``), else the pure-Python one; same results."""
    if HAS_NATIVE and not force_python:
        return NativeBatchReader(paths, kinds, keys, bufsize=bufsize)
    return batchread.PyBatchReader(paths, kinds, keys, bufsize=bufsize)


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def write_one_py(path: str | Path, data: bytes) -> int:
    """``os.open``/``os.write``/``os.close``; 0 or the errno (EIO for a short write)."""
    try:
        # O_TRUNC as ``echo >`` and Go's os.WriteFile: ignored by cgroupfs/resctrl, right for plain files
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    except OSError as err:
        return err.errno or errno.EIO
    err_no = 0
    try:
        # cgroup files take one value per write(2): a short write means the kernel took part of it
        if os.write(fd, data) != len(data):
            err_no = errno.EIO
    except OSError as err:
        err_no = err.errno or errno.EIO
    finally:
        try:
            os.close(fd)
        except OSError as err:
            err_no = err_no or err.errno or errno.EIO
    return err_no


def write_batch(items: Sequence[tuple[str | Path, str | bytes]], *, force_python: bool = False) -> list[int]:
    """Write ``(path, value)`` pairs in order, one open/write/close each; per-item 0 or errno."""
    if not items:
        return []
    encoded = [(os.fsencode(p), _as_bytes(v)) for p, v in items]
    if not HAS_NATIVE or force_python:
        return [write_one_py(os.fsdecode(p), v) for p, v in encoded]
    ffi, lib = _native.ffi, _native.lib
    n = len(encoded)
    # keep the cdata buffers alive for the call: cffi frees them with their Python owners
    path_bufs = [ffi.new("char[]", p) for p, _ in encoded]
    value_bufs = [ffi.new("char[]", v) for _, v in encoded]
    paths = ffi.new("const char *[]", path_bufs)
    values = ffi.new("const char *[]", value_bufs)
    lens = ffi.new("size_t[]", [len(v) for _, v in encoded])
    errs = ffi.new("int[]", n)
    lib.kn_write_batch(paths, values, lens, n, errs)
    result: list[int] = ffi.unpack(errs, n)
    return result


@dataclass(frozen=True, slots=True)
class SchemataResult:
    """``errno`` 0 on success; else the kernel's explanation from ``info/last_cmd_status``."""

    errno: int
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.errno == 0


def write_schemata(
    path: str | Path, text: str, status_path: str | Path, *, force_python: bool = False
) -> SchemataResult:
    """Write a resctrl ``schemata``; on failure also read why from ``status_path``."""
    data = text.encode()
    if not HAS_NATIVE or force_python:
        err_no = write_one_py(path, data)
        if err_no == 0:
            return SchemataResult(0)
        try:
            fd = os.open(status_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return SchemataResult(err_no)
        try:
            msg = os.read(fd, SCHEMATA_MSG_CAP - 1)
        except OSError:
            msg = b""
        finally:
            os.close(fd)
        return SchemataResult(err_no, msg.rstrip(b" \t\n\r").decode(errors="replace"))
    ffi, lib = _native.ffi, _native.lib
    buf = ffi.new("char[]", SCHEMATA_MSG_CAP)
    rc = int(
        lib.kn_write_schemata(
            os.fsencode(path), data, len(data), os.fsencode(status_path), buf, SCHEMATA_MSG_CAP
        )
    )
    return SchemataResult(rc, ffi.string(buf).decode(errors="replace") if rc else "")


# ---------------------------------------------------------------------------------------------------
# perf_event groups (csrc/koordlet_perf.h); the meaning of events and samples is koordlet.system.perf's
# ---------------------------------------------------------------------------------------------------


def perf_probe(event_type: int, config: int) -> int:
    """0 if the kernel counts event ``(type, config)`` for this thread, else -errno (-ENOSYS without
    the compiled module)."""
    if _native is None:
        return -errno.ENOSYS
    return int(_native.lib.kn_perf_probe(event_type, config))


@dataclass(frozen=True, slots=True)
class PerfGroupRead:
    """One CPU's group: ns the group was enabled and actually counting (multiplexing), raw values."""

    cpu: int
    time_enabled: int
    time_running: int
    values: tuple[int, ...]


class PerfGroups:
    """One perf_event group per CPU counting the cgroup open as ``cgroup_fd`` (compiled module only).

    ``events`` are ``(type, config)`` pairs, the first leading. Raises ``OSError`` (errno, and which CPU
    and event failed) when the kernel refuses one; then nothing stays open.
    """

    def __init__(self, cgroup_fd: int, cpus: Sequence[int], events: Sequence[tuple[int, int]]) -> None:
        if _native is None:
            raise OSError(errno.ENOSYS, "perf needs the compiled module koordlet.system._native")
        ffi, lib = _native.ffi, _native.lib
        self.cpus = tuple(cpus)
        self._nevents = len(events)
        self._n = len(self.cpus) * self._nevents
        self._fds: Any = ffi.new("int[]", max(1, self._n))
        failed = ffi.new("int *")
        rc = int(
            lib.kn_perf_open(
                cgroup_fd,
                ffi.new("int[]", list(self.cpus)),
                len(self.cpus),
                ffi.new("uint32_t[]", [t for t, _ in events]),
                ffi.new("uint64_t[]", [c for _, c in events]),
                self._nevents,
                self._fds,
                failed,
            )
        )
        if rc < 0:
            idx = int(failed[0])
            where = (
                f"cpu {self.cpus[idx // self._nevents]}, event {events[idx % self._nevents]}"
                if idx >= 0
                else ""
            )
            raise OSError(-rc, f"perf_event_open: {os.strerror(-rc)} ({where})")
        self._out: Any = ffi.new("uint64_t[]", max(1, len(self.cpus) * (3 + self._nevents)))
        self._lock = threading.Lock()
        self._closed = False

    def enable(self, on: bool = True) -> None:
        """Reset and start (or stop) counting on every CPU."""
        with self._lock:
            self._check_open()
            rc = int(_native.lib.kn_perf_enable(self._fds, len(self.cpus), self._nevents, 1 if on else 0))
        if rc < 0:
            raise OSError(-rc, f"perf ioctl: {os.strerror(-rc)}")

    def read(self) -> list[PerfGroupRead]:
        with self._lock:
            self._check_open()
            rc = int(_native.lib.kn_perf_read(self._fds, len(self.cpus), self._nevents, self._out))
            raw: list[int] = _native.ffi.unpack(self._out, len(self.cpus) * (3 + self._nevents))
        if rc < 0:
            raise OSError(-rc, f"perf read: {os.strerror(-rc)}")
        width = 3 + self._nevents
        return [
            PerfGroupRead(
                cpu, raw[i * width + 1], raw[i * width + 2], tuple(raw[i * width + 3 : (i + 1) * width])
            )
            for i, cpu in enumerate(self.cpus)
        ]

    def open_fds(self) -> int:
        with self._lock:
            return 0 if self._closed else sum(1 for i in range(self._n) if self._fds[i] >= 0)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                _native.lib.kn_perf_close(self._fds, self._n)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("perf groups already closed")

    def __enter__(self) -> PerfGroups:
        return self

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # descriptors are kernel resources: never leak them with a forgotten object
        if not getattr(self, "_closed", True):
            self.close()
