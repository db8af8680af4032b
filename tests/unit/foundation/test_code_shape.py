"""The shape every module keeps (the style guide's rules, checked): under 400 lines, opening with a
docstring that says its role. Empty package markers are the one exception."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAX_LINES = 400


def tracked_python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in out.stdout.split()]


def test_every_module_is_short_and_says_what_it_is() -> None:
    files = tracked_python_files()
    assert len(files) > 100
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in files
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert long == []
    undocumented = [
        str(p.relative_to(ROOT))
        for p in files
        if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert undocumented == []


_RE_CALLS = {"compile", "match", "fullmatch", "search"}


def test_no_pattern_ends_in_a_dollar_anchor() -> None:
    # ``$`` also matches before a trailing newline, so ``pod<uid>\n`` once passed as a pod directory;
    # a pattern that must match the whole input ends in ``\Z`` (or is used with fullmatch).
    found = []
    for p in tracked_python_files():
        rel = p.relative_to(ROOT)
        if rel.parts[0] not in ("koordlet", "qosplugins"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute)):
                continue
            func, first = node.func, node.args[0]
            if not (isinstance(func.value, ast.Name) and func.value.id == "re" and func.attr in _RE_CALLS):
                continue
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
                if text.endswith("$") and not text.endswith("\\$"):
                    found.append(f"{rel}:{node.lineno}: {text!r}")
    assert found == []
