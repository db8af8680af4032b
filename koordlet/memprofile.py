"""``GET /debug/memory``: who holds the agent's memory, by component, when Python traces its allocations.

Served only when ``tracemalloc`` traces (start the agent with ``PYTHONTRACEMALLOC=<frames>``); otherwise the
route answers 404 and costs nothing. Each live allocation is charged to the component of the innermost frame
that is the agent's or a third-party library's (standard-library frames are looked through, so a ``dict`` the
metric cache builds is the cache's): ``koordlet.<package>``, ``qosplugins``, ``koord.<package>``, a library's
top package, or ``imports`` (module code and constants, allocated while modules load) and ``python`` (nothing
else on the stack). ``rss`` is the process's resident set, ``tracing`` what ``tracemalloc`` itself holds
(absent from an untraced agent), and ``untraced`` the rest: the interpreter, C libraries, thread stacks and
allocator slack.
"""

from __future__ import annotations

import sysconfig
import tracemalloc
from collections.abc import Iterable
from pathlib import Path

from koordshared.runtime.httpserver import Response, json_response

_STDLIB = tuple(
    str(Path(p).resolve()) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)
_SITE = ("site-packages", "dist-packages")
_IMPORTING = ("<frozen importlib", "<frozen zipimport")


def component_of(frames: Iterable[str]) -> str:
    """The owning component of an allocation, from its traceback's file names, innermost first."""
    importing = False
    for filename in frames:
        if filename.startswith(_IMPORTING):
            importing = True
            continue
        if filename.startswith("<"):
            continue
        parts = Path(filename).parts
        for marker in _SITE:
            if marker in parts:
                rest = parts[parts.index(marker) + 1 :]
                if rest and rest[0] in ("koordlet", "koord", "qosplugins"):
                    return _ours(rest)
                return rest[0].removesuffix(".py") if rest else "python"
        for i, part in enumerate(parts):
            if part in ("koordlet", "koord", "qosplugins") and filename.endswith(".py"):
                return _ours(parts[i:])
        if filename.startswith(_STDLIB):
            continue
        return Path(filename).stem
    return "imports" if importing else "python"


def _ours(parts: tuple[str, ...]) -> str:
    top = parts[0]
    if top == "qosplugins" or len(parts) < 3:
        return top
    return f"{top}.{parts[1].removesuffix('.py')}"


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def by_component() -> dict[str, int]:
    """Bytes of live traced allocations per component (empty when not tracing)."""
    if not tracemalloc.is_tracing():
        return {}
    out: dict[str, int] = {}
    for stat in tracemalloc.take_snapshot().statistics("traceback"):
        name = component_of(f.filename for f in reversed(stat.traceback))
        out[name] = out.get(name, 0) + stat.size
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def route(_query: dict[str, list[str]]) -> Response:
    if not tracemalloc.is_tracing():
        return json_response({"error": "not tracing: start the agent with PYTHONTRACEMALLOC=<frames>"}, 404)
    # read before the snapshot, which itself takes tens of MiB for a moment
    rss, tracing = _rss(), tracemalloc.get_tracemalloc_memory()
    traced = tracemalloc.get_traced_memory()[0]
    components = by_component()
    return json_response(
        {
            "rss": rss,
            "traced": traced,
            "tracing": tracing,
            "untraced": max(rss - traced - tracing, 0),
            "components": components,
        }
    )
