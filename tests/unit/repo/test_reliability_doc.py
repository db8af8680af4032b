"""``docs/reliability.md`` stays true: every case F1 to F22 is there, and every test it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

DOC = ROOT / "docs" / "reliability.md"
_REF = re.compile(r"`((?:[\w./]+/)?(test_\w+)\.py)((?:::\w+)*)`")


def _tests_in(path: Path) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}


def _resolve(ref: str) -> list[Path]:
    return [p for p in (ROOT / "tests").rglob(Path(ref).name) if p.as_posix().endswith(ref)]


def test_every_case_is_mapped() -> None:
    text = DOC.read_text()
    for n in range(1, 23):
        assert re.search(rf"^\| F{n} \|", text, re.M), f"F{n} is missing"


def test_every_named_test_exists() -> None:
    text = DOC.read_text()
    refs = _REF.findall(text)
    assert len(refs) > 40
    missing = []
    for ref, _stem, names in refs:
        files = _resolve(ref)
        if len(files) != 1:
            missing.append(f"{ref}: {len(files)} files")
            continue
        defined = _tests_in(files[0])
        for name in [n for n in names.split("::") if n]:
            if name not in defined and not any(
                d.startswith(name.rstrip("_")) for d in defined if "..." in text
            ):
                missing.append(f"{ref}::{name}")
    assert missing == []
