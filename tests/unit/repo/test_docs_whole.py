"""Each document says a thing once: no heading repeats within a file and no paragraph stands twice in the
tracked Markdown (a merge that keeps both sides of a section, the stale one included, shows here)."""

from __future__ import annotations

import re
from collections import Counter

from tests.support.importgraph import tracked
from tests.support.paths import ROOT

# Shorter paragraphs (a "Tests:" line, a one-line command) may fairly recur.
MIN_CHARS = 160


def _docs() -> list[str]:
    return [f for f in tracked("*.md") if not f.startswith("tests/")]


def _paragraphs(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= MIN_CHARS]


def test_no_heading_repeats_within_a_document() -> None:
    repeated = {}
    for rel in _docs():
        heads = Counter(line for line in (ROOT / rel).read_text().splitlines() if line.startswith("#"))
        if dup := sorted(h for h, n in heads.items() if n > 1):
            repeated[rel] = dup
    assert repeated == {}


def test_no_paragraph_stands_twice() -> None:
    seen: dict[str, str] = {}
    twice = []
    for rel in _docs():
        for para in _paragraphs((ROOT / rel).read_text()):
            if para in seen:
                twice.append(f"{seen[para]} and {rel}: {para[:80]}...")
            else:
                seen[para] = rel
    assert twice == []
