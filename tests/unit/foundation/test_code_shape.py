"""The shape every module keeps (the style guide's rules, checked): under 400 lines, opening with a
docstring that says its role. Empty package markers are the one exception."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from tests.support.paths import ROOT

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


def _is_open(call: ast.AST) -> bool:
    return isinstance(call, ast.Call) and (
        (isinstance(call.func, ast.Name) and call.func.id == "open")
        or (isinstance(call.func, ast.Attribute) and call.func.attr == "open")
    )


def _write_mode(call: ast.Call) -> bool:
    modes = [a for a in call.args[1:2]] + [k.value for k in call.keywords if k.arg == "mode"]
    if isinstance(call.func, ast.Attribute) and call.args:  # Path.open(mode)
        modes.append(call.args[0])
    return any(
        isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes
    )


def test_no_buffered_write_can_lose_its_error() -> None:
    # F5b: a buffered write without a close surfaces its error only at GC time, where Python swallows it
    # (a cgroup value silently not written). Writes go through os.write, or an open() in a with block.
    found = []
    for p in tracked_python_files():
        rel = p.relative_to(ROOT)
        if rel.parts[0] not in ("koordlet", "qosplugins") or rel.parts[:2] == ("koordlet", "testing"):
            continue
        tree = ast.parse(p.read_text())
        managed = {
            id(item.context_expr)
            for node in ast.walk(tree)
            if isinstance(node, ast.With)
            for item in node.items
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "write" and _is_open(node.value):
                found.append(f"{rel}:{node.lineno}: open(...).write(...)")
            elif (
                _is_open(node)
                and isinstance(node, ast.Call)
                and _write_mode(node)
                and id(node) not in managed
            ):
                found.append(f"{rel}:{node.lineno}: open() for writing outside a with block")
    assert found == []


def test_digits_are_checked_the_way_int_reads_them() -> None:
    # str.isdigit() accepts superscripts that int() refuses ("¹"): a file holding one made a parser
    # raise ValueError instead of its InvalidValue (found by fuzzing). isdecimal() is exactly int()'s set.
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in tracked_python_files()
        if p.relative_to(ROOT).parts[0] in ("koordlet", "qosplugins")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if ".isdigit()" in line and "# bytes" not in line  # bytes.isdigit() is ASCII-only: fine
    ]
    assert found == []
