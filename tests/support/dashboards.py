"""The Grafana dashboards of ``deploy/dashboards/`` as the tests read them: each file, its panels (those in
collapsed rows included) and every panel query."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from tests.support.paths import ROOT

DASHBOARDS = ROOT / "deploy" / "dashboards"


def load() -> dict[str, dict[str, Any]]:
    """Every dashboard by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(doc: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every panel, those inside (collapsed) rows included."""
    for p in doc.get("panels") or ():
        yield p
        yield from p.get("panels") or ()


def queries(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(panel title, PromQL)`` of every panel target."""
    for p in panels(doc):
        for t in p.get("targets") or ():
            yield p["title"], t["expr"]
