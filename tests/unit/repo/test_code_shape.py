"""The shape every module keeps (the style guide's rules, checked): whole modules (a cap high enough that a
contract or a class with its method family lives in one file), no import cycle inside a package,
``TYPE_CHECKING`` imports only across packages, short docstrings that say what and why, and no tracker
references. Empty package markers are the one exception to "opens with a docstring"."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.support.importgraph import (
    code_packages,
    import_graph,
    packages,
    same_package,
    strongly_connected,
    tracked,
)
from tests.support.paths import ROOT

MAX_LINES = 1000
MODULE_DOC_LINES = 12
DEF_DOC_LINES = 8
ISSUE_REF = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
BENCH_CITE = re.compile(r"\bbench/|\bbench\.\w")


def tracked_python_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in out.stdout.split()]


def test_no_import_cycle_inside_a_package() -> None:
    # Every import counts (module level, under TYPE_CHECKING, inside a function): siblings that need each
    # other are one module split in two.
    graph = import_graph()
    pkgs = packages(graph)
    succ = {a: {b for b in e.all() if same_package(a, b, pkgs)} for a, e in graph.items()}
    assert strongly_connected(succ) == []


def test_type_checking_imports_cross_packages() -> None:
    # A TYPE_CHECKING import of a sibling hides a cycle; across packages it only spares an import.
    graph = import_graph()
    pkgs = packages(graph)
    found = [f"{a} -> {b}" for a, e in graph.items() for b in e.type_checking if same_package(a, b, pkgs)]
    assert found == []


def _docstring(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _docstrings(rel: str) -> list[tuple[str, ast.Expr, int]]:
    """(name, docstring node, line limit): the module's, then every def's and class's by qualified name."""
    tree = ast.parse((ROOT / rel).read_text())
    out = []
    if (doc := _docstring(tree)) is not None:
        out.append((rel, doc, MODULE_DOC_LINES))

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if (doc := _docstring(child)) is not None:
                    out.append((f"{rel}:{prefix}{child.name}", doc, DEF_DOC_LINES))
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return out


def test_docstrings_are_short_and_cite_no_benchmark() -> None:
    # Docstrings say what and why; measured figures live in docs/ and the benchmarks' output.
    long, cites = set(), set()
    roots = code_packages()
    for rel in tracked():
        if rel.split("/", 1)[0] not in roots:
            continue
        for name, doc, limit in _docstrings(rel):
            if (doc.end_lineno or doc.lineno) - doc.lineno + 1 > limit:
                long.add(name)
            assert isinstance(doc.value, ast.Constant)  # as _docstring found it
            if BENCH_CITE.search(str(doc.value.value)):
                cites.add(name)
    assert sorted(long) == []
    assert sorted(cites) == []


def test_no_issue_numbers() -> None:
    # The repository does not carry its tracker: a reference says the fact, not where it was asked for.
    found = set()
    for rel in tracked("*"):
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if ISSUE_REF.search(text):
            found.add(rel)
    assert found == set()


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
