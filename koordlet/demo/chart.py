"""A line chart drawn into an RGB buffer and saved as PNG: axes with ticks and labels, a shaded span
(the LS spike), one line per series (steps for values that hold until the next change) and a legend.

Only what the demo's plot needs; :mod:`~koordlet.demo.png` writes the file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from koordlet.demo import font, png

Color = tuple[int, int, int]
WHITE: Color = (255, 255, 255)
BLACK: Color = (30, 30, 30)
GRID: Color = (225, 225, 225)
SPAN: Color = (255, 236, 210)


@dataclass(frozen=True)
class Series:
    label: str
    color: Color
    points: Sequence[tuple[float, float]]
    """``(x, y)`` in data units, by rising x."""
    step: bool = False
    """Hold each value until the next point (a setting), instead of joining points (a measurement)."""


class Canvas:
    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i : i + 3] = bytes(color)

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(max(min(y0, y1), 0), min(max(y0, y1), self.height - 1) + 1):
            for x in range(max(min(x0, x1), 0), min(max(x0, x1), self.width - 1) + 1):
                self.set(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        """Bresenham's line, ``width`` pixels thick (a square pen)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        lo, hi = -(width // 2), (width - 1) // 2
        while True:
            for oy in range(lo, hi + 1):
                for ox in range(lo, hi + 1):
                    self.set(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 1) -> None:
        font.draw_text(lambda px, py: self.set(px, py, color), x, y, text, scale)

    def png(self, text: dict[str, str] | None = None) -> bytes:
        return png.encode(self.width, self.height, self.pixels, text)


def nice_step(span: float, ticks: int = 6) -> float:
    """A 1/2/5 x 10^n step giving about ``ticks`` intervals over ``span``."""
    raw = max(span, 1e-9) / ticks
    mag = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))


def line_chart(
    series: Sequence[Series],
    *,
    x_max: float,
    y_max: float,
    title: str,
    x_label: str,
    y_label: str,
    span: tuple[float, float, str] | None = None,
    size: tuple[int, int] = (960, 540),
    text: dict[str, str] | None = None,
) -> bytes:
    """PNG bytes of the chart; ``span`` is ``(x0, x1, label)`` shaded behind the lines; ``text`` goes
    into ``tEXt`` chunks."""
    width, height = size
    c = Canvas(width, height)
    left, right, top, bottom = 70, width - 20, 50, height - 90
    x_max, y_max = max(x_max, 1e-9), max(y_max, 1e-9)

    def px(x: float) -> int:
        return left + round(min(max(x, 0.0), x_max) / x_max * (right - left))

    def py(y: float) -> int:
        return bottom - round(min(max(y, 0.0), y_max) / y_max * (bottom - top))

    c.text(left, 14, title, scale=2)
    if span is not None:
        c.fill(px(span[0]), top, px(span[1]), bottom, SPAN)
        c.text(px(span[0]) + 4, top + 4, span[2], (170, 90, 0))
    y_step, x_step = nice_step(y_max), nice_step(x_max, 10)
    k = 0
    while k * y_step <= y_max + 1e-9:
        y = py(k * y_step)
        c.line(left, y, right, y, GRID)
        label = f"{k * y_step:g}"
        c.text(left - 8 - font.text_width(label), y - 3, label)
        k += 1
    k = 0
    while k * x_step <= x_max + 1e-9:
        x = px(k * x_step)
        c.line(x, bottom, x, bottom + 4, BLACK)
        label = f"{k * x_step:g}"
        c.text(x - font.text_width(label) // 2, bottom + 9, label)
        k += 1
    c.line(left, top, left, bottom, BLACK)
    c.line(left, bottom, right, bottom, BLACK)
    c.text((left + right - font.text_width(x_label)) // 2, bottom + 24, x_label)
    c.text(8, top - 14, y_label)
    for s in series:
        pts = list(s.points)
        if s.step and pts:
            pts = [
                q
                for a, b in zip(pts, [*pts[1:], (x_max, pts[-1][1])], strict=True)
                for q in (a, (b[0], a[1]))
            ]
        for (x0, y0), (x1, y1) in itertools.pairwise(pts):
            c.line(px(x0), py(y0), px(x1), py(y1), s.color, width=2)
    lx = left
    for s in series:
        c.fill(lx, height - 34, lx + 18, height - 30, s.color)
        c.text(lx + 24, height - 36, s.label)
        lx += 24 + font.text_width(s.label) + 30
    return c.png(text)
