"""The import graph of the code packages, read from source: which module imports which, and how (at module
level, under ``TYPE_CHECKING``, or inside a function). The code-shape rules are written over it."""

from __future__ import annotations

import ast
import configparser
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.paths import ROOT


def code_packages() -> tuple[str, ...]:
    """The top-level packages import-linter checks (``.importlinter``'s root_packages)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    return tuple(cfg["importlinter"]["root_packages"].split())


def tracked(pattern: str = "*.py") -> list[str]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if (ROOT / f).is_file()]


def module_name(rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class Edges:
    runtime: set[str] = field(default_factory=set)
    type_checking: set[str] = field(default_factory=set)
    lazy: set[str] = field(default_factory=set)

    def all(self) -> set[str]:
        return self.runtime | self.type_checking | self.lazy


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _longest_known(name: str, known: set[str]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def _targets(mod: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [t for a in node.names if (t := _longest_known(a.name, known))]
    base = node.module or ""
    if node.level:
        parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    out = []
    for a in node.names:
        full = f"{base}.{a.name}"
        target = full if full in known else _longest_known(base, known)
        if target:
            out.append(target)
    return out


def import_graph() -> dict[str, Edges]:
    roots = code_packages()
    files = {module_name(f): f for f in tracked() if f.split("/", 1)[0] in roots}
    known = set(files)
    graph: dict[str, Edges] = {}
    for mod, rel in files.items():
        edges = Edges()
        is_pkg = rel.endswith("__init__.py")

        def visit(
            body: list[ast.stmt], kind: str, mod: str = mod, is_pkg: bool = is_pkg, e: Edges = edges
        ) -> None:
            for st in body:
                if isinstance(st, ast.Import | ast.ImportFrom):
                    getattr(e, kind).update(t for t in _targets(mod, is_pkg, st, known) if t != mod)
                elif isinstance(st, ast.If):
                    visit(st.body, "type_checking" if _is_type_checking(st.test) else kind)
                    visit(st.orelse, kind)
                elif isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit(st.body, "lazy" if kind == "runtime" else kind)
                elif isinstance(st, ast.Try):
                    for b in (st.body, st.orelse, st.finalbody, *[h.body for h in st.handlers]):
                        visit(b, kind)
                elif isinstance(st, ast.ClassDef | ast.With | ast.For | ast.While):
                    visit(st.body, kind)

        visit(ast.parse((ROOT / rel).read_text(encoding="utf-8")).body, "runtime")
        graph[mod] = edges
    return graph


def packages(graph: dict[str, Edges]) -> set[str]:
    roots = code_packages()
    return {module_name(f) for f in tracked("*__init__.py") if f.split("/", 1)[0] in roots}


def same_package(a: str, b: str, pkgs: set[str]) -> bool:
    """Siblings of one package; a package's ``__init__`` counts as inside it."""

    def home(m: str) -> str:
        return m if m in pkgs else m.rpartition(".")[0]

    return a.rpartition(".")[0] == b.rpartition(".")[0] or home(a) == b or home(b) == a or home(a) == home(b)


def strongly_connected(succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                on.discard(w)
                comp.append(w)
            on.discard(v)
            comp.append(v)
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(succ):
        if v not in index:
            strong(v)
    return out
