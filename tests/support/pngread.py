"""Reading a PNG's chunks back (CRCs checked) and its ``tEXt`` data, for tests of the demo's plot."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """``(type, data)`` of every chunk; ``ValueError`` for anything that is not a well-formed PNG."""
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG (bad signature)")
    pos, out = len(SIGNATURE), []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if len(body) != length or zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"chunk {kind!r}: bad length or CRC")
        out.append((kind, body))
        pos += 12 + length
    return out


def text_chunks(data: bytes) -> dict[str, str]:
    found = {}
    for kind, body in chunks(data):
        if kind == b"tEXt":
            key, _, value = body.partition(b"\x00")
            found[key.decode("latin-1")] = value.decode("latin-1")
    return found


def pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the RGB rows of an 8-bit RGB PNG whose rows use filter 0 (what the demo writes)."""
    parts = chunks(data)
    assert parts[0][0] == b"IHDR" and parts[-1][0] == b"IEND"
    width, height, depth, color, _c, _f, _i = struct.unpack(">IIBBBBB", parts[0][1])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(b"".join(body for kind, body in parts if kind == b"IDAT"))
    stride = width * 3 + 1
    assert len(raw) == stride * height and all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(height))
