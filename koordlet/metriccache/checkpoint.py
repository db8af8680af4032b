"""The checkpoint file: a compact binary image of the cache, written atomically and bounded in size.

Layout (all little-endian)::

    header   magic "KMC\\x01" | u16 version | u16 reserved | u32 meta_len | u64 data_len
    meta     UTF-8 JSON {"saved_at": epoch, "series": [[metric, {labels}, n], ...]} (a "kv" key of older
             files is ignored)
    data     for each series in meta order: n float64 epoch timestamps, then n float64 values
    trailer  u32 CRC-32 of everything before it

The CRC sits at the end so the file is written in one pass. Timestamps on disk are wall-clock (epoch)
seconds because monotonic time restarts at every boot; the cache converts on save and load. Files are
replaced with the usual write-temp / fsync / rename / fsync-dir sequence, so a crash leaves either the old
or the new file.
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from koord.runtime.errors import KoordletError

MAGIC = b"KMC\x01"
VERSION = 1
FILE_NAME = "metriccache.ckpt"
_HEADER = struct.Struct("<4sHHIQ")
_TRAILER = struct.Struct("<I")
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


def _meta_bytes(image: Image) -> bytes:
    meta = {
        "saved_at": image.saved_at,
        "series": [[s.metric, dict(s.labels), len(s.ts)] for s in image.series],
    }
    return json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()


def estimated_size(image: Image) -> int:
    samples = sum(len(s.ts) for s in image.series)
    return _HEADER.size + len(_meta_bytes(image)) + _SAMPLE_BYTES * samples + _TRAILER.size


def encode(image: Image) -> Iterator[bytes | Floats]:
    """The file's bytes as chunks, arrays passed through uncopied; the CRC trailer comes last."""
    meta = _meta_bytes(image)
    data_len = 8 * sum(len(s.ts) + len(s.vs) for s in image.series)
    header = _HEADER.pack(MAGIC, VERSION, 0, len(meta), data_len)
    crc = zlib.crc32(meta, zlib.crc32(header))
    yield header
    yield meta
    for s in image.series:
        for part in (_le(s.ts), _le(s.vs)):
            crc = zlib.crc32(part, crc)
            yield part
    yield _TRAILER.pack(crc)


def decode(blob: bytes) -> Image:
    """Parse and verify a checkpoint; any inconsistency raises :class:`CorruptCheckpoint`."""
    if len(blob) < _HEADER.size:
        raise CorruptCheckpoint(f"truncated: {len(blob)} bytes is shorter than the header")
    magic, version, _, meta_len, data_len = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise CorruptCheckpoint(f"bad magic {magic!r}")
    if version != VERSION:
        raise CorruptCheckpoint(f"unsupported version {version} (this agent reads {VERSION})")
    expected = _HEADER.size + meta_len + data_len + _TRAILER.size
    if expected != len(blob):
        raise CorruptCheckpoint(f"length mismatch: header says {expected} bytes, file has {len(blob)}")
    (crc,) = _TRAILER.unpack_from(blob, len(blob) - _TRAILER.size)
    if zlib.crc32(memoryview(blob)[: len(blob) - _TRAILER.size]) != crc:
        raise CorruptCheckpoint("checksum mismatch")
    body = memoryview(blob)[_HEADER.size : len(blob) - _TRAILER.size]
    try:
        meta = json.loads(bytes(body[:meta_len]))
        saved_at = float(meta["saved_at"])
        entries = meta["series"]
        if not isinstance(entries, list):
            raise TypeError("series must be a list")
        series: list[SeriesImage] = []
        offset = meta_len
        for metric, labels, n in entries:
            if not isinstance(metric, str) or not isinstance(labels, dict) or not isinstance(n, int) or n < 0:
                raise TypeError(f"bad series entry {metric!r}")
            if offset + 2 * 8 * n > len(body):
                raise CorruptCheckpoint("series data runs past the end of the file")
            ts, vs = array("d"), array("d")
            ts.frombytes(body[offset : offset + 8 * n])
            vs.frombytes(body[offset + 8 * n : offset + 16 * n])
            if _BIG_ENDIAN:
                ts.byteswap()
                vs.byteswap()
            offset += 16 * n
            series.append(SeriesImage(metric, {str(k): str(v) for k, v in labels.items()}, ts, vs))
    except (ValueError, KeyError, TypeError) as err:
        raise CorruptCheckpoint(f"bad metadata: {err}") from err
    if offset != len(body):
        raise CorruptCheckpoint(f"{len(body) - offset} bytes of data not described by the metadata")
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
