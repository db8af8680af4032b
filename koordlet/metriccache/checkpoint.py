"""The checkpoint file: a compact binary image of the cache, written atomically and bounded in size.

Layout, version 2 (all little-endian)::

    header   magic "KMC\\x01" | u16 version (2) | u16 reserved | u32 0 | u64 0
    data     for each series in meta order: n float64 epoch timestamps, then n float64 values
    meta     UTF-8 JSON {"saved_at": epoch, "series": [[metric, {labels}, n], ...]}
    trailer  u32 meta_len | u64 data_len | u32 CRC-32 of everything before the CRC
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from koordlet.api.errors import KoordletError

MAGIC = b"KMC\x01"
VERSION = 2
_VERSION_META_FIRST = 1
FILE_NAME = "metriccache.ckpt"
_HEADER = struct.Struct("<4sHHIQ")
_TRAILER = struct.Struct("<I")
_TRAILER_V2 = struct.Struct("<IQI")
_SAMPLE_BYTES = 16
_BIG_ENDIAN = sys.byteorder == "big"


class CorruptCheckpoint(KoordletError):
    """The checkpoint cannot be trusted: bad magic, unknown version, truncated, or checksum mismatch."""


Floats: TypeAlias = "array[float] | memoryview"
"""Doubles: an array, or a view into one (a checkpoint's series share their kind's timestamps)."""


@dataclass(frozen=True, slots=True)
class SeriesImage:
    """One series as saved: epoch timestamps ascending, values aligned with them."""

    metric: str
    labels: Mapping[str, str]
    ts: Floats
    vs: Floats


@dataclass(frozen=True, slots=True)
class Image:
    """Everything a checkpoint holds."""

    saved_at: float
    series: list[SeriesImage]


def _le(a: Floats) -> Floats:
    if _BIG_ENDIAN:
        a = array("d", a)
        a.byteswap()
    return a


def _meta_bytes(saved_at: float, entries: list[list[object]]) -> bytes:
    meta = {"saved_at": saved_at, "series": entries}
    return json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()


def estimated_size(image: Image) -> int:
    samples = sum(len(s.ts) for s in image.series)
    entries: list[list[object]] = [[s.metric, dict(s.labels), len(s.ts)] for s in image.series]
    return (
        _HEADER.size + len(_meta_bytes(image.saved_at, entries)) + _SAMPLE_BYTES * samples + _TRAILER_V2.size
    )


def encode(saved_at: float, series: Iterable[SeriesImage]) -> Iterator[bytes | Floats]:
    """The file's bytes as chunks, arrays passed through uncopied, taking ``series`` one at a time (it may
    be a generator copying each out of the cache as it goes); the description and the CRC come last."""
    header = _HEADER.pack(MAGIC, VERSION, 0, 0, 0)
    crc = zlib.crc32(header)
    yield header
    entries: list[list[object]] = []
    data_len = 0
    for s in series:
        for part in (_le(s.ts), _le(s.vs)):
            crc = zlib.crc32(part, crc)
            yield part
        entries.append([s.metric, dict(s.labels), len(s.ts)])
        data_len += 16 * len(s.ts)
    meta = _meta_bytes(saved_at, entries)
    lengths = struct.pack("<IQ", len(meta), data_len)
    crc = zlib.crc32(lengths, zlib.crc32(meta, crc))
    yield meta
    yield lengths + struct.pack("<I", crc)


def decode(blob: bytes) -> Image:
    """Parse and verify a checkpoint (version 2 or 1); any inconsistency raises :class:`CorruptCheckpoint`."""
    if len(blob) < _HEADER.size:
        raise CorruptCheckpoint(f"truncated: {len(blob)} bytes is shorter than the header")
    magic, version, _, meta_len, data_len = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise CorruptCheckpoint(f"bad magic {magic!r}")
    if version not in (VERSION, _VERSION_META_FIRST):
        raise CorruptCheckpoint(f"unsupported version {version} (this agent reads {VERSION} and 1)")
    trailer = _TRAILER_V2.size if version == VERSION else _TRAILER.size
    if len(blob) < _HEADER.size + trailer:
        raise CorruptCheckpoint(f"truncated: {len(blob)} bytes is shorter than header and trailer")
    if version == VERSION:
        meta_len, data_len, crc = _TRAILER_V2.unpack_from(blob, len(blob) - trailer)
    else:
        (crc,) = _TRAILER.unpack_from(blob, len(blob) - trailer)
    expected = _HEADER.size + meta_len + data_len + trailer
    if expected != len(blob):
        raise CorruptCheckpoint(f"length mismatch: header says {expected} bytes, file has {len(blob)}")
    if zlib.crc32(memoryview(blob)[: len(blob) - _TRAILER.size]) != crc:
        raise CorruptCheckpoint("checksum mismatch")
    body = memoryview(blob)[_HEADER.size : _HEADER.size + meta_len + data_len]
    if version == VERSION:
        meta_raw, data = body[data_len:], body[:data_len]
    else:
        meta_raw, data = body[:meta_len], body[meta_len:]
    try:
        meta = json.loads(bytes(meta_raw))
        saved_at = float(meta["saved_at"])
        entries = meta["series"]
        if not isinstance(entries, list):
            raise TypeError("series must be a list")
        series: list[SeriesImage] = []
        offset = 0
        for metric, labels, n in entries:
            if not isinstance(metric, str) or not isinstance(labels, dict) or not isinstance(n, int) or n < 0:
                raise TypeError(f"bad series entry {metric!r}")
            if offset + 2 * 8 * n > len(data):
                raise CorruptCheckpoint("series data runs past the end of the file")
            ts, vs = array("d"), array("d")
            ts.frombytes(data[offset : offset + 8 * n])
            vs.frombytes(data[offset + 8 * n : offset + 16 * n])
            if _BIG_ENDIAN:
                ts.byteswap()
                vs.byteswap()
            offset += 16 * n
            series.append(SeriesImage(metric, {str(k): str(v) for k, v in labels.items()}, ts, vs))
    except (ValueError, KeyError, TypeError) as err:
        raise CorruptCheckpoint(f"bad metadata: {err}") from err
    if offset != len(data):
        raise CorruptCheckpoint(f"{len(data) - offset} bytes of data not described by the metadata")
    return Image(saved_at=saved_at, series=series)


def fit(image: Image, max_bytes: int, trim_first: Callable[[str], bool]) -> tuple[Image, int]:
    """Drop the oldest samples until the encoded image fits ``max_bytes``: first among series whose
    metric satisfies ``trim_first`` (pod/container), then among the rest. Returns the image and how many
    samples were dropped (series left empty are removed)."""
    series = list(image.series)
    dropped = 0
    for in_group in (trim_first, lambda m: not trim_first(m)):
        current = Image(image.saved_at, series)
        excess = estimated_size(current) - max_bytes
        if excess <= 0:
            break
        need = math.ceil(excess / _SAMPLE_BYTES)
        group = [s for s in series if in_group(s.metric)]
        times = sorted(itertools.chain.from_iterable(s.ts for s in group))
        if not times:
            continue
        cutoff = times[min(need, len(times)) - 1]
        kept: list[SeriesImage] = []
        for s in series:
            if not in_group(s.metric):
                kept.append(s)
                continue
            # Timestamps are ascending, so the samples at or before the cutoff are a prefix.
            i = bisect.bisect_right(s.ts, cutoff)
            dropped += i
            if i < len(s.ts):
                kept.append(SeriesImage(s.metric, s.labels, s.ts[i:], s.vs[i:]))
        series = kept
    return Image(image.saved_at, series), dropped
