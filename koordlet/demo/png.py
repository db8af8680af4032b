"""A minimal PNG encoder (8-bit RGB, no filtering, zlib) with text chunks, and a chunk reader.

Why our own and not matplotlib: the demo draws one line chart, which needs a pixel buffer, lines, boxes and
a small bitmap font (:mod:`~koordlet.demo.chart`); the format needs a signature, ``IHDR``, ``tEXt``,
``IDAT`` and ``IEND`` with CRCs, which ``zlib`` and ``struct`` give. matplotlib would add ~40 MB (numpy,
pillow, fonttools, ...) to an agent's install for one picture. The numbers behind the picture travel in a
``tEXt`` chunk, so the plot can be checked without reading pixels.
"""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def encode(width: int, height: int, rgb: bytes | bytearray, text: dict[str, str] | None = None) -> bytes:
    """PNG bytes of a ``width`` x ``height`` RGB image (``rgb``: rows top to bottom, 3 bytes a pixel)."""
    stride = width * 3
    if len(rgb) != stride * height:
        raise ValueError(f"{len(rgb)} bytes of pixels for {width}x{height}, want {stride * height}")
    raw = b"".join(b"\x00" + bytes(rgb[y * stride : (y + 1) * stride]) for y in range(height))
    out = [SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))]
    for key, value in (text or {}).items():
        out.append(_chunk(b"tEXt", key.encode("latin-1") + b"\x00" + value.encode("latin-1")))
    out += [_chunk(b"IDAT", zlib.compress(raw, 9)), _chunk(b"IEND", b"")]
    return b"".join(out)
