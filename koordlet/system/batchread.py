"""Batch reading of many small cgroup files: the shared result types and the pure-Python reader.

Layer: ``koordlet.system``. :class:`PyBatchReader` is the fallback for the C reader in ``native.py`` and
gives identical results: one cached ``O_RDONLY|O_CLOEXEC`` descriptor per file, ``os.pread`` at offset 0,
the same parsing and the same per-file status (0 or -errno). Use ``native.open_batch_reader`` to get the
fast one when it is built.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Protocol

MISSING: Final = -(2**63)
"""Slot value for a wanted key the file lacks (and for every slot of a failed file): INT64_MIN."""
INT64_MAX: Final = 2**63 - 1
DEFAULT_BUFSIZE: Final = 16384
"""One pread per file: v1 ``memory.stat`` is ~0.7 KiB, v2 ~3 KiB; a full buffer is -EOVERFLOW."""
GONE_STATUSES: Final = frozenset({-errno.ENOENT, -errno.ENODEV})

_BLANKS = b" \t\n\r"


class FileKind(enum.IntEnum):
    """Values match the C enum (``KN_COUNTER``, ``KN_KEYVALUE``)."""

    COUNTER = 0
    """One integer (``cpuacct.usage``); ``max`` reads as INT64_MAX."""
    KEY_VALUE = 1
    """``key value`` lines (``memory.stat``, ``cpu.stat``); the caller names the keys it wants."""
    CPU_LIST = 2
    """A CPU list (``cpuset.cpus``, ``0-3,8``): its number of CPUs (empty is 0)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each file's values sit in the flat slot list."""

    paths: tuple[str, ...]
    kinds: tuple[FileKind, ...]
    keys: tuple[tuple[str, ...], ...]
    offsets: tuple[int, ...]
    slots: int

    @classmethod
    def build(
        cls, paths: Sequence[str | Path], kinds: Sequence[FileKind], keys: Sequence[Sequence[str]]
    ) -> Layout:
        if not len(paths) == len(kinds) == len(keys):
            raise ValueError("paths, kinds and keys must have the same length")
        offsets: list[int] = []
        slot = 0
        norm_keys: list[tuple[str, ...]] = []
        for kind, file_keys in zip(kinds, keys, strict=True):
            offsets.append(slot)
            if kind != FileKind.KEY_VALUE:
                norm_keys.append(())
                slot += 1
                continue
            if not file_keys:
                raise ValueError("a key-value file needs at least one key")
            for key in file_keys:
                if not key or any(c in key for c in " \n\t\r\0"):
                    raise ValueError(f"bad key {key!r}")
            norm_keys.append(tuple(file_keys))
            slot += len(file_keys)
        return cls(
            paths=tuple(os.fspath(p) for p in paths),
            kinds=tuple(FileKind(k) for k in kinds),
            keys=tuple(norm_keys),
            offsets=tuple(offsets),
            slots=slot,
        )

    def swapped(self, i: int, j: int) -> Layout:
        """This layout with files ``i`` and ``j`` trading paths (they must have the same kind and keys)."""
        if self.kinds[i] != self.kinds[j] or self.keys[i] != self.keys[j]:
            raise ValueError(f"files {i} and {j} differ in kind or keys")
        paths = list(self.paths)
        paths[i], paths[j] = paths[j], paths[i]
        return dataclasses.replace(self, paths=tuple(paths))

    def truncated(self, n: int) -> Layout:
        """The first ``n`` files and their slots."""
        if not 0 <= n <= len(self.paths):
            raise ValueError(f"cannot keep {n} of {len(self.paths)} files")
        slots = self.offsets[n] if n < len(self.paths) else self.slots
        return Layout(self.paths[:n], self.kinds[:n], self.keys[:n], self.offsets[:n], slots)

    def extended(
        self, paths: Sequence[str | Path], kinds: Sequence[FileKind], keys: Sequence[Sequence[str]]
    ) -> Layout:
        """These files after this layout's, their slots after its slots."""
        more = Layout.build(paths, kinds, keys)
        return Layout(
            self.paths + more.paths,
            self.kinds + more.kinds,
            self.keys + more.keys,
            self.offsets + tuple(o + self.slots for o in more.offsets),
            self.slots + more.slots,
        )


@dataclass(frozen=True, slots=True)
class ReadResults:
    """One sweep: ``status[i]`` is 0 or -errno for file ``i``; ``values`` are the flat slots."""

    layout: Layout
    status: list[int]
    values: list[int]

    def ok(self, i: int) -> bool:
        return self.status[i] == 0

    def gone(self, i: int) -> bool:
        """The file's cgroup vanished (ENOENT on open, ENODEV on a held descriptor)."""
        return self.status[i] in GONE_STATUSES

    def value(self, i: int, k: int = 0) -> int | None:
        """Value of key ``k`` of file ``i`` (the counter for ``k == 0``), ``None`` if missing or failed."""
        v = self.values[self.layout.offsets[i] + k]
        return None if v == MISSING else v


class BatchReader(Protocol):
    """What both implementations offer; one thread reads at a time (calls are serialised).

    A reader can change its files in place (``swap``, ``truncate``, ``extend``): a reader
    over many alike targets then follows a few targets coming and going without reopening the others."""

    layout: Layout

    def read(self) -> ReadResults: ...

    def fill(self) -> int:
        """Read every file and keep the results (``results``); the number of files that failed."""
        ...

    def results(self) -> ReadResults:
        """The last ``fill``'s results (``ValueError`` if none since the files last changed)."""
        ...

    def swap(self, i: int, j: int) -> None:
        """Files ``i`` and ``j`` (same kind and keys) trade paths and held descriptors."""
        ...

    def truncate(self, n: int) -> None:
        """Drop the files from index ``n`` on, closing their descriptors."""
        ...

    def extend(
        self, paths: Sequence[str | Path], kinds: Sequence[FileKind], keys: Sequence[Sequence[str]]
    ) -> None:
        """Append files (opened on the next read)."""
        ...

    def open_fds(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> BatchReader: ...

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None: ...


def _parse_int(raw: bytes) -> int:
    """Decimal with optional ``-``, or ``max``; returns -errno on failure (mirrors the C parser)."""
    if raw == b"max":
        return INT64_MAX
    digits = raw[1:] if raw[:1] == b"-" else raw
    # bytes.isdigit is ASCII-only, unlike int(), which takes "+1", "1_0" and non-ASCII digits
    if not digits or not digits.isdigit():  # bytes: ASCII digits only
        raise _ParseError(-errno.EINVAL)
    significant = digits.lstrip(b"0")
    # int() refuses over 4300 digits; anything over 19 significant digits is past INT64_MAX anyway
    if len(significant) > 19:
        raise _ParseError(-errno.ERANGE)
    v = int(digits)
    if v > INT64_MAX:
        raise _ParseError(-errno.ERANGE)
    return -v if digits is not raw else v


MAX_CPU: Final = 65535
"""CPU numbers above this are refused (-ERANGE), as in C and ``koordlet.api.cpulist.MAX_CPU_ID``."""


def _parse_cpulist(raw: bytes) -> int:
    """Number of CPUs in a list such as ``0-3,8``; raises -errno on failure (a port of the C scanner, so
    both report the same status for the same bad text)."""
    p, n, count = 0, len(raw), 0
    while p < n:
        bounds = [-1, -1]
        for part in (0, 1):
            v = -1
            while p < n and 48 <= raw[p] <= 57:
                v = (0 if v < 0 else v) * 10 + raw[p] - 48
                if v > MAX_CPU:
                    raise _ParseError(-errno.ERANGE)
                p += 1
            if v < 0:
                raise _ParseError(-errno.EINVAL)
            bounds[part] = v
            if part == 0 and p < n and raw[p] == 45:  # "-"
                p += 1
                continue
            break
        lo, hi = bounds[0], bounds[1] if bounds[1] >= 0 else bounds[0]
        if hi < lo:
            raise _ParseError(-errno.EINVAL)
        count += hi - lo + 1
        if p < n:
            if raw[p] != 44 or p + 1 == n:  # ","
                raise _ParseError(-errno.EINVAL)
            p += 1
    return count


class _ParseError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class PyBatchReader:
    """Pure-Python batch reader: ``os.pread`` on descriptors cached per file index."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        kinds: Sequence[FileKind],
        keys: Sequence[Sequence[str]],
        *,
        bufsize: int = DEFAULT_BUFSIZE,
    ) -> None:
        self.layout = Layout.build(paths, kinds, keys)
        self._bufsize = bufsize
        self._fds: list[int] = []
        self._lock = threading.Lock()
        self._last: ReadResults | None = None
        # key -> slot indexes within the file (a key may be asked twice, as the C side allows)
        self._want: list[dict[bytes, list[int]]] = []
        # (key, "\nkey ", "key ", "\nkey\n") per key; None where a key repeats (slow path only)
        self._fast: list[list[tuple[bytes, bytes, bytes, bytes]] | None] = []
        self._add_files(self.layout.keys)

    def _add_files(self, keys: Sequence[tuple[str, ...]]) -> None:
        for file_keys in keys:
            want: dict[bytes, list[int]] = {}
            for k, key in enumerate(file_keys):
                want.setdefault(key.encode(), []).append(k)
            self._want.append(want)
            enc = [k.encode() for k in file_keys]
            unique = len(set(enc)) == len(enc)
            self._fast.append(
                [(k, b"\n" + k + b" ", k + b" ", b"\n" + k + b"\n") for k in enc] if unique else None
            )
            self._fds.append(-1)

    def swap(self, i: int, j: int) -> None:
        with self._lock:
            self.layout = self.layout.swapped(i, j)
            self._fds[i], self._fds[j] = self._fds[j], self._fds[i]

    def truncate(self, n: int) -> None:
        with self._lock:
            self.layout = self.layout.truncated(n)
            for i in range(n, len(self._fds)):
                self._close_one(i)
            del self._fds[n:], self._want[n:], self._fast[n:]

    def extend(
        self, paths: Sequence[str | Path], kinds: Sequence[FileKind], keys: Sequence[Sequence[str]]
    ) -> None:
        with self._lock:
            before = len(self.layout.paths)
            self.layout = self.layout.extended(paths, kinds, keys)
            self._add_files(self.layout.keys[before:])

    def _close_one(self, i: int) -> None:
        fd = self._fds[i]
        if fd >= 0:
            self._fds[i] = -1
            os.close(fd)

    def read(self) -> ReadResults:
        self.fill()
        return self.results()

    def fill(self) -> int:
        res = self._read()
        self._last = res
        return sum(map(bool, res.status))

    def results(self) -> ReadResults:
        if self._last is None or self._last.layout is not self.layout:
            raise ValueError("no read to give the results of")
        return self._last

    def _read(self) -> ReadResults:
        layout = self.layout
        status = [0] * len(layout.paths)
        values = [MISSING] * layout.slots
        with self._lock:
            fds = self._fds
            for i, path in enumerate(layout.paths):
                fd = fds[i]
                try:
                    if fd < 0:
                        fd = fds[i] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                    data = os.pread(fd, self._bufsize, 0)
                except OSError as err:
                    st = -(err.errno or errno.EIO)
                    # ENODEV: the cgroup was removed under the held descriptor; reopen next time
                    if fd >= 0 and st in GONE_STATUSES:
                        os.close(fd)
                        fds[i] = -1
                    status[i] = st
                    continue
                if len(data) == self._bufsize:
                    status[i] = -errno.EOVERFLOW
                    continue
                base = layout.offsets[i]
                try:
                    if layout.kinds[i] == FileKind.COUNTER:
                        values[base] = _parse_int(data.strip(_BLANKS))
                    elif layout.kinds[i] == FileKind.CPU_LIST:
                        values[base] = _parse_cpulist(data.strip(_BLANKS))
                    else:
                        fast = self._fast[i]
                        if fast is None or not self._parse_kv_fast(data, fast, values, base):
                            self._parse_kv(data, self._want[i], len(layout.keys[i]), values, base)
                except _ParseError as err:
                    status[i] = err.status
                    for k in range(max(1, len(layout.keys[i]))):
                        values[base + k] = MISSING
        return ReadResults(layout, status, values)

    @staticmethod
    def _parse_kv_fast(
        data: bytes, pats: list[tuple[bytes, bytes, bytes, bytes]], out: list[int], base: int
    ) -> bool:
        """bytes.find per key (C speed); False when only the line-by-line parser can decide.

        That is: a key is missing, a value does not parse (the line parser reports the first bad line
        of the file, as C does), or a bare ``key`` line (which C takes, with an empty value) comes first.
        """
        got: list[int] = []
        for key, nl_pat, start_pat, bare in pats:
            if data.startswith(start_pat):
                at, vstart = 0, len(start_pat)
            else:
                at = data.find(nl_pat)
                if at < 0:
                    return False
                vstart = at + len(nl_pat)
                if data.startswith(key + b"\n") or data.find(bare, 0, at + 1) >= 0:
                    return False
            end = data.find(b"\n", vstart)
            raw = (data[vstart:] if end < 0 else data[vstart:end]).strip(_BLANKS)
            if raw.isdigit() and len(raw) < 19:  # bytes: ASCII digits only
                got.append(int(raw))
                continue
            try:
                got.append(_parse_int(raw))
            except _ParseError:
                return False
        out[base : base + len(got)] = got
        return True

    @staticmethod
    def _parse_kv(data: bytes, want: dict[bytes, list[int]], nkeys: int, out: list[int], base: int) -> None:
        found = 0
        for line in data.split(b"\n"):
            if found >= nkeys:
                break
            key, _, rest = line.partition(b" ")
            slots = want.get(key)
            if slots is None:
                continue
            for k in slots:
                if out[base + k] == MISSING:
                    out[base + k] = _parse_int(rest.strip(_BLANKS))
                    found += 1
                    break

    def open_fds(self) -> int:
        with self._lock:
            return sum(1 for fd in self._fds if fd >= 0)

    def close(self) -> None:
        with self._lock:
            for i, fd in enumerate(self._fds):
                if fd >= 0:
                    os.close(fd)
                    self._fds[i] = -1

    def __enter__(self) -> PyBatchReader:
        return self

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
