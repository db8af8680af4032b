"""Run koord-scheduler's entry point with a wall-clock mark at each stage of a pod's way through it (the
watch line read, the pod informed and queued, its scheduling cycle, its Binding request sent and
answered), written as JSON when the process exits; :func:`print_stages` joins them with kube-apiserver's
audit times of the pod's create and binding (one clock: the same machine) and prints where an idle pod's
latency goes. A profiler would charge each stage with its own overhead; these marks cost a few
microseconds a pod.

    python -m bench.workloads.traced OUT.json koord.scheduler.cli:entry -- --config ...
"""

from __future__ import annotations

import atexit
import importlib
import json
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

STAGES = (
    ("created", "read", "the watch: the create's answer to the event's line read here"),
    ("read", "decoded", "the line decoded"),
    ("decoded", "informed", "the pod trimmed"),
    ("informed", "queued", "the cache, the event handlers and the queue's add"),
    ("queued", "cycle", "to the scheduling thread"),
    ("cycle", "cycled", "the scheduling cycle"),
    ("cycled", "binding", "to a binding thread, PreBind"),
    ("binding", "bound", "the Binding sent and kube-apiserver's bind, to its answer written"),
    ("bound", "answered", "the answer read here"),
)


def print_stages(
    path: Path, created: Mapping[str, float], bound: Mapping[str, float], names: Sequence[str]
) -> None:
    """Per stage, p50 and p90 over ``names`` (ms), from the marks at ``path`` and the audit times."""
    if not path.exists():
        print(f"  (no trace at {path})")
        return
    marks: dict[str, dict[str, float]] = json.loads(path.read_text())
    rows = []
    for n in names:
        m = dict(marks.get(n) or {})
        if n in created and n in bound:
            m["created"], m["bound"] = created[n], bound[n]
        if all(k in m for k, _, _ in STAGES) and "answered" in m:
            rows.append(m)
    print(f"  where an idle pod's time went ({len(rows)} of {len(names)} pods traced), ms:")
    print(f"  {'p50':>7} {'p90':>7}  stage")
    for a, b, what in STAGES:
        d = sorted((r[b] - r[a]) * 1000 for r in rows)
        if d:
            print(f"  {d[len(d) // 2]:>7.3f} {d[int(len(d) * 0.9)]:>7.3f}  {what}")
    total = sorted((r["bound"] - r["created"]) * 1000 for r in rows)
    if total:
        p50, p90 = total[len(total) // 2], total[int(len(total) * 0.9)]
        print(f"  {p50:>7.3f} {p90:>7.3f}  create -> bound, as audited")


def _install(marks: dict[str, dict[str, float]]) -> None:
    from koord.scheduler.core import api, scheduler
    from koordshared.kube import informer

    last_read = threading.local()

    def mark(name: str, stage: str, t: float | None = None) -> None:
        marks.setdefault(name, {}).setdefault(stage, time.time() if t is None else t)

    lines = informer.Informer._lines

    def traced_lines(self: Any, resp: Any) -> Iterator[bytes]:
        for line in lines(self, resp):
            last_read.t = time.time()
            yield line

    class TracedJson:
        """The informer module's ``json``, with the time each event's decoding ended."""

        def __getattr__(self, name: str) -> Any:
            return getattr(json, name)

        @staticmethod
        def loads(s: Any, **kw: Any) -> Any:
            doc = json.loads(s, **kw)
            last_read.decoded = time.time()
            return doc

    apply = informer.Informer._apply

    def traced_apply(self: Any, typ: str, obj: Any) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if typ == "ADDED" and self.name == "pods":
            mark(name, "read", getattr(last_read, "t", None))
            mark(name, "decoded", getattr(last_read, "decoded", None))
            mark(name, "informed")
        apply(self, typ, obj)
        if typ == "ADDED" and self.name == "pods":
            mark(name, "queued")

    one = scheduler.Scheduler.schedule_one

    def traced_one(self: Any, qpi: Any) -> None:
        name = str(qpi.pod["metadata"]["name"])
        mark(name, "cycle")
        try:
            one(self, qpi)
        finally:
            mark(name, "cycled")

    bind = api.KubeAPI.bind

    def traced_bind(self: Any, pod: Any, node: str) -> None:
        name = str(pod["metadata"]["name"])
        mark(name, "binding")
        try:
            bind(self, pod, node)
        finally:
            mark(name, "answered")

    setattr(informer, "json", TracedJson())  # noqa: B010 (the module's private import)
    informer.Informer._lines = traced_lines  # type: ignore[method-assign]
    informer.Informer._apply = traced_apply  # type: ignore[method-assign]
    scheduler.Scheduler.schedule_one = traced_one  # type: ignore[method-assign]
    api.KubeAPI.bind = traced_bind  # type: ignore[method-assign]


def main() -> None:
    out, target, *rest = sys.argv[1:]
    args = rest[1:] if rest[:1] == ["--"] else rest
    marks: dict[str, dict[str, float]] = {}
    _install(marks)
    atexit.register(lambda: Path(out).write_text(json.dumps(marks)))
    module, _, func = target.partition(":")
    sys.argv = [module, *args]
    getattr(importlib.import_module(module), func)(args)


if __name__ == "__main__":
    main()
