"""docs/architecture.md names every package and top-level module of ``koordlet``, ``koordshared`` and
``koord``, and nothing that is gone."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

DOC = ROOT / "docs" / "architecture.md"
# Trees whose packages and modules the page names one by one; the processes' own trees are named whole.
TREES = ("koordlet", "koordshared", "koord")


def _units() -> set[str]:
    units: set[str] = set()
    for tree in TREES:
        pkg = ROOT / tree
        units |= {f"{tree}/{p.name}/" for p in pkg.iterdir() if (p / "__init__.py").is_file()}
        modules = (p for p in pkg.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
        units |= {f"{tree}/{p.name}" for p in modules}
    return units


def _named() -> set[str]:
    return set(re.findall(r"`((?:koordlet|koordshared|koord)/[a-z_]+(?:/|\.py))`", DOC.read_text()))


def test_every_package_and_module_is_named() -> None:
    missing = _units() - _named()
    assert not missing, f"docs/architecture.md does not name {sorted(missing)}"


def test_nothing_named_is_gone() -> None:
    gone = {n for n in _named() if not (ROOT / n.rstrip("/")).exists()}
    assert not gone, f"docs/architecture.md names what no longer exists: {sorted(gone)}"
