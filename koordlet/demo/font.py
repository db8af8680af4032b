"""A 5x7 bitmap font (the classic character-LCD shapes) for the demo chart's labels.

Each glyph is seven rows of five bits, leftmost pixel in bit 4. Characters without a glyph draw as ``?``.
"""

from __future__ import annotations

from collections.abc import Callable

WIDTH, HEIGHT = 5, 7

_GLYPHS = {
    " ": "00 00 00 00 00 00 00", ".": "00 00 00 00 00 0C 0C", ",": "00 00 00 00 0C 04 08",
    ":": "00 0C 0C 00 0C 0C 00", "%": "18 19 02 04 08 13 03", "(": "02 04 08 08 08 04 02",
    ")": "08 04 02 02 02 04 08", "-": "00 00 00 1F 00 00 00", "/": "00 01 02 04 08 10 00",
    "+": "00 04 04 1F 04 04 00", "=": "00 00 1F 00 1F 00 00", "_": "00 00 00 00 00 00 1F",
    "'": "0C 04 08 00 00 00 00", "?": "0E 11 01 02 04 00 04", "x": "00 00 11 0A 04 0A 11",
    "0": "0E 11 13 15 19 11 0E", "1": "04 0C 04 04 04 04 0E", "2": "0E 11 01 02 04 08 1F",
    "3": "1F 02 04 02 01 11 0E", "4": "02 06 0A 12 1F 02 02", "5": "1F 10 1E 01 01 11 0E",
    "6": "06 08 10 1E 11 11 0E", "7": "1F 01 02 04 08 08 08", "8": "0E 11 11 0E 11 11 0E",
    "9": "0E 11 11 0F 01 02 0C",
    "A": "0E 11 11 11 1F 11 11", "B": "1E 11 11 1E 11 11 1E", "C": "0E 11 10 10 10 11 0E",
    "D": "1C 12 11 11 11 12 1C", "E": "1F 10 10 1E 10 10 1F", "F": "1F 10 10 1E 10 10 10",
    "G": "0E 11 10 17 11 11 0F", "H": "11 11 11 1F 11 11 11", "I": "0E 04 04 04 04 04 0E",
    "J": "07 02 02 02 02 12 0C", "K": "11 12 14 18 14 12 11", "L": "10 10 10 10 10 10 1F",
    "M": "11 1B 15 15 11 11 11", "N": "11 11 19 15 13 11 11", "O": "0E 11 11 11 11 11 0E",
    "P": "1E 11 11 1E 10 10 10", "Q": "0E 11 11 11 15 12 0D", "R": "1E 11 11 1E 14 12 11",
    "S": "0F 10 10 0E 01 01 1E", "T": "1F 04 04 04 04 04 04", "U": "11 11 11 11 11 11 0E",
    "V": "11 11 11 11 11 0A 04", "W": "11 11 11 15 15 15 0A", "X": "11 11 0A 04 0A 11 11",
    "Y": "11 11 11 0A 04 04 04", "Z": "1F 01 02 04 08 10 1F",
    "a": "00 00 0E 01 0F 11 0F", "b": "10 10 16 19 11 11 1E", "c": "00 00 0E 10 10 11 0E",
    "d": "01 01 0D 13 11 11 0F", "e": "00 00 0E 11 1F 10 0E", "f": "06 09 08 1C 08 08 08",
    "g": "00 0F 11 11 0F 01 0E", "h": "10 10 16 19 11 11 11", "i": "04 00 0C 04 04 04 0E",
    "j": "02 00 06 02 02 12 0C", "k": "10 10 12 14 18 14 12", "l": "0C 04 04 04 04 04 0E",
    "m": "00 00 1A 15 15 11 11", "n": "00 00 16 19 11 11 11", "o": "00 00 0E 11 11 11 0E",
    "p": "00 00 1E 11 1E 10 10", "q": "00 00 0D 13 0F 01 01", "r": "00 00 16 19 10 10 10",
    "s": "00 00 0E 10 0E 01 1E", "t": "08 08 1C 08 08 09 06", "u": "00 00 11 11 11 13 0D",
    "v": "00 00 11 11 11 0A 04", "w": "00 00 11 11 15 15 0A", "y": "00 00 11 11 0F 01 0E",
    "z": "00 00 1F 02 04 08 1F",
}  # fmt: skip
GLYPHS = {ch: tuple(int(b, 16) for b in rows.split()) for ch, rows in _GLYPHS.items()}


def text_width(text: str, scale: int = 1) -> int:
    return len(text) * (WIDTH + 1) * scale


def draw_text(plot: Callable[[int, int], None], x: int, y: int, text: str, scale: int = 1) -> None:
    """Call ``plot(px, py)`` for every lit pixel of ``text`` with its top-left corner at ``(x, y)``."""
    for i, ch in enumerate(text):
        rows = GLYPHS.get(ch) or GLYPHS["?"]
        left = x + i * (WIDTH + 1) * scale
        for r, bits in enumerate(rows):
            for c in range(WIDTH):
                if bits & (1 << (WIDTH - 1 - c)):
                    for dy in range(scale):
                        for dx in range(scale):
                            plot(left + c * scale + dx, y + r * scale + dy)
