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
        self._filled = False
        """A read has filled the buffers since the files last changed (``results`` has something to give)."""

    def _check(self, rc: int, what: str) -> None:
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc), what)

    def swap(self, i: int, j: int) -> None:
        with self._lock:
            layout = self.layout.swapped(i, j)
            self._check(int(_native.lib.kn_reader_swap(self._handle, i, j)), "kn_reader_swap")
            self.layout, self._filled = layout, False

    def truncate(self, n: int) -> None:
        with self._lock:
            layout = self.layout.truncated(n)
            self._check(int(_native.lib.kn_reader_truncate(self._handle, n)), "kn_reader_truncate")
            self.layout, self._n, self._filled = layout, n, False

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
            self.layout, self._n, self._filled = layout, n, False
            # buffers for as many values as the capacity can hold without asking again
            if len(self._status) < n:
                self._status = ffi.new("int[]", self._cap)
            if len(self._values) < layout.slots:
                per_file = -(-layout.slots // max(1, n))
                self._values = ffi.new("int64_t[]", max(layout.slots, per_file * self._cap))

    def read(self) -> ReadResults:
        with self._lock:
            self._fill()
            return self._results()

    def fill(self) -> int:
        with self._lock:
            return self._fill()

    def results(self) -> ReadResults:
        with self._lock:
            if not self._filled:
                raise ValueError("no read to give the results of")
            return self._results()

    def _fill(self) -> int:
        if self._closed:
            raise ValueError("read from a closed batch reader")
        self._filled = True
        return int(_native.lib.kn_reader_read(self._handle, self._values, self._status))

    def _results(self) -> ReadResults:
        ffi = _native.ffi
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


class NativeSweep:
    """The pod sweep's fast path in C (``kn_sweep_rates``) over the last read of one native reader: the
    plan's offsets and the baselines are C arrays, so a steady sweep turns no read value into a Python
    int and does its arithmetic in one call; only the rates and memory come back, as floats.

    The caller owns the plan (:meth:`plan` after each change of it) and moves baselines in and out
    (:meth:`load`, :meth:`baselines`) around its own per-target sweep."""

    def __init__(self, reader: NativeBatchReader) -> None:
        self._reader = reader
        self._n = 0
        self._need = 0
        """Slots the plan reads: the reader's last read must have at least these."""
        self.plan((), (), ())

    def plan(self, o_cpu: Sequence[int], o_mem: Sequence[int], o_thr: Sequence[int]) -> None:
        """Target ``j`` reads its CPU counter at slot ``o_cpu[j]``, memory at the three from ``o_mem[j]``,
        throttling at the two from ``o_thr[j]``. The baselines are cleared (:meth:`load` them)."""
        n = len(o_cpu)
        if not n == len(o_mem) == len(o_thr):
            raise ValueError("the plan's offset columns differ in length")
        if n and min(*o_cpu, *o_mem, *o_thr) < 0:
            raise ValueError("a negative slot offset")
        ffi = _native.ffi
        size = max(1, n)
        self._o_cpu: Any = ffi.new("int[]", list(o_cpu) or [0])
        self._o_mem: Any = ffi.new("int[]", list(o_mem) or [0])
        self._o_thr: Any = ffi.new("int[]", list(o_thr) or [0])
        self._base: tuple[Any, Any, Any] = (
            ffi.new("int64_t[]", size),
            ffi.new("int64_t[]", size),
            ffi.new("int64_t[]", size),
        )
        self._fresh: Any = ffi.new("unsigned char[]", size)
        self._out: tuple[Any, Any, Any] = (
            ffi.new("double[]", size),
            ffi.new("double[]", size),
            ffi.new("double[]", size),
        )
        self._n = n
        self._need = max((max(o_cpu) + 1, max(o_mem) + 3, max(o_thr) + 2)) if n else 0

    def load(
        self, cpu_ns: Sequence[int], periods: Sequence[int], throttled: Sequence[int], fresh: set[int]
    ) -> bool:
        """The baselines by plan position; ``fresh``: the positions that have none yet. False (the C
        sweep cannot take them) when a baseline does not fit in 64 bits."""
        n = self._n
        if not n == len(cpu_ns) == len(periods) == len(throttled):
            raise ValueError("baselines and plan differ in length")
        if any(not 0 <= j < n for j in fresh):
            raise ValueError("a fresh position outside the plan")
        if n:
            try:
                for arr, column in zip(self._base, (cpu_ns, periods, throttled), strict=True):
                    arr[0:n] = column
            except OverflowError:
                return False
        flags = self._fresh
        _native.ffi.memmove(flags, bytes(len(flags)), len(flags))
        for j in fresh:
            flags[j] = 1
        return True

    def baselines(self) -> tuple[list[int], list[int], list[int]]:
        unpack, n = _native.ffi.unpack, self._n
        cpu_ns: list[int] = unpack(self._base[0], n)
        periods: list[int] = unpack(self._base[1], n)
        throttled: list[int] = unpack(self._base[2], n)
        return cpu_ns, periods, throttled

    def run(
        self, cpu_scale: int, dt: float, limit_ns: float
    ) -> tuple[list[float], list[float], list[float]] | None:
        """CPU rates, memory and throttled ratios by plan position, the baselines moved on; or ``None``,
        nothing changed, when a per-target sweep must decide (see ``kn_sweep_rates``)."""
        reader, n = self._reader, self._n
        with reader._lock:
            if not reader._filled or reader.layout.slots < self._need:
                return None
            cpu, mem, thr = self._out
            base_cpu, base_per, base_thr = self._base
            rc = int(
                _native.lib.kn_sweep_rates(
                    reader._values,
                    self._o_cpu,
                    self._o_mem,
                    self._o_thr,
                    n,
                    cpu_scale,
                    dt,
                    limit_ns,
                    base_cpu,
                    base_per,
                    base_thr,
                    self._fresh,
                    cpu,
                    mem,
                    thr,
                )
            )
        if rc:
            return None
        unpack = _native.ffi.unpack
        cpu_v: list[float] = unpack(cpu, n)
        mem_v: list[float] = unpack(mem, n)
        thr_v: list[float] = unpack(thr, n)
        return cpu_v, mem_v, thr_v


def fast_sweep(reader: batchread.BatchReader) -> NativeSweep | None:
    """The C fast sweep over ``reader``'s reads when it is the C reader, else ``None``."""
    return NativeSweep(reader) if isinstance(reader, NativeBatchReader) else None


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
