"""One ``/status`` document as plain text lines: what ``koordlet top`` draws and ``--once`` prints.

Pure functions of the document (and of the previous one, for the agent's own CPU rate), so the view is
tested without a terminal. Lines are cut to ``width`` and never wrap, which the live redraw relies on.
Missing numbers (no sample yet) show as ``-``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

BAR = 30
POD_COLUMNS = ("POD", "QOS", "KUBE-QOS", "PRIORITY", "CPU", "MEMORY")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def cores(v: Any, digits: int = 2) -> str:
    n = _num(v)
    return "-" if n is None else f"{n:.{digits}f}"


def milli(v: Any) -> str:
    """Millicores as cores (the budget is computed in millicores, read in cores)."""
    n = _num(v)
    return "-" if n is None else f"{n / 1000:.2f}"


def size(v: Any) -> str:
    n = _num(v)
    if n is None:
        return "-"
    for unit in ("B", "Ki", "Mi", "Gi", "Ti"):
        if abs(n) < 1024 or unit == "Ti":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return "-"  # pragma: no cover - the loop always returns


def bar(used: float | None, total: float | None, width: int = BAR) -> str:
    if used is None or not total:
        return "[" + "?" * width + "]"
    filled = max(0, min(width, round(used / total * width)))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def pct(used: float | None, total: float | None) -> str:
    return "-" if used is None or not total else f"{used / total * 100:.0f}%"


def clock(ts: Any) -> str:
    n = _num(ts)
    return "--:--:--" if n is None else time.strftime("%H:%M:%S", time.localtime(n))


def duration(seconds: float) -> str:
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def header(doc: Mapping[str, Any], where: str, prev: Mapping[str, Any] | None) -> str:
    agent = doc.get("agent") or {}
    up = duration((_num(doc.get("time")) or 0) - (_num(agent.get("startedAt")) or 0))
    cost = f"RSS {size(agent.get('rssBytes'))}"
    if prev is not None:
        dt = (_num(doc.get("time")) or 0) - (_num(prev.get("time")) or 0)
        used = (_num(agent.get("cpuSeconds")) or 0) - (_num((prev.get("agent") or {}).get("cpuSeconds")) or 0)
        if dt > 0:
            cost = f"{used / dt:.2f} cores, {cost}"
    node = (doc.get("node") or {}).get("name", "?")
    window = _num(doc.get("windowSeconds")) or 0
    return (
        f"koordlet top · node {node} · {where} · {clock(doc.get('time'))} · usage over {window:g}s · "
        f"agent {agent.get('version', '?')} up {up}, {cost}"
    )


def node_lines(doc: Mapping[str, Any]) -> list[str]:
    node = doc.get("node") or {}
    cpu, mem = node.get("cpu") or {}, node.get("memory") or {}
    c_used, c_cap = _num(cpu.get("usedCores")), _num(cpu.get("capacityCores"))
    m_used, m_cap = _num(mem.get("usedBytes")), _num(mem.get("capacityBytes"))
    return [
        f"CPU  {bar(c_used, c_cap)} {cores(c_used)} / {cores(c_cap)} cores {pct(c_used, c_cap):>4}"
        f"   system {cores(node.get('systemCPUCores'))}",
        f"MEM  {bar(m_used, m_cap)} {size(m_used)} / {size(m_cap)} {pct(m_used, m_cap):>4}",
    ]


def be_lines(doc: Mapping[str, Any]) -> list[str]:
    """The BE budget and how it was computed, then what the kernel holds and what BE uses."""
    be = doc.get("beCPU") or {}
    sup = be.get("suppress") or {}
    if sup.get("active"):
        floor = f", at least {sup['minPercent']}%" if sup.get("minPercent") is not None else ""
        budget = (
            f"BE   budget {milli(sup.get('budgetMilli'))} cores = {milli(sup.get('capacityMilli'))} x "
            f"{sup.get('thresholdPercent')}% - non-BE {milli(sup.get('nonBEMilli'))}{floor} "
            f"(LS pods {milli(sup.get('lsPodsMilli'))} + host apps {milli(sup.get('lsHostAppsMilli'))} + "
            f"system {milli(sup.get('systemMilli'))})  [{sup.get('policy')}, {sup.get('path')} "
            f"{clock(sup.get('decidedAt'))}]"
        )
    elif sup:
        budget = f"BE   suppression paused: {sup.get('why', '?')}"
    else:
        budget = "BE   suppression: no decision (BECPUSuppress off or no sample yet)"
    quota = _num(be.get("cfsQuotaUs"))
    quota_text = "unlimited" if quota is None or quota < 0 else f"{quota:.0f}/{be.get('cfsPeriodUs')}us"
    cpuset = be.get("cpuset") or "-"
    allowed = (
        f"     allowed {cores(be.get('allowedCores'))} cores (cpuset {cpuset}, quota {quota_text})"
        f"   BE using {cores(be.get('usedCores'))} cores"
    )
    lines = [budget, allowed]
    if sup.get("active") and "fastSamplesWanted" in sup:
        band = sup.get("noiseBandMilli")
        noise = f", noise band {milli(band)} cores" if band is not None else ", noise not learnt yet"
        lines.append(
            f"     fast path: sampling{noise}"
            if sup["fastSamplesWanted"]
            else "     fast path: asleep (BE idle or the node out of reach of the threshold)"
        )
    return lines


def pod_name(pod: Mapping[str, Any]) -> str:
    ns, name = pod.get("namespace") or "", pod.get("name") or pod.get("uid") or "?"
    return f"{ns}/{name}" if ns else str(name)


def priority(pod: Mapping[str, Any]) -> str:
    band, value = pod.get("priorityClass") or "", pod.get("priority")
    return f"{band} {value}".strip() if value is not None else (band or "-")


def pod_lines(pods: Sequence[Mapping[str, Any]], limit: int | None) -> list[str]:
    rows = [POD_COLUMNS] + [
        (
            pod_name(p),
            p.get("qos") or "-",
            p.get("kubeQOS") or "-",
            priority(p),
            cores(p.get("cpuCores"), 3),
            size(p.get("memoryBytes")),
        )
        for p in pods
    ]
    shown = rows if limit is None or len(rows) <= limit else rows[: max(limit - 1, 1)]
    widths = [max(len(r[i]) for r in shown) for i in range(len(POD_COLUMNS))]
    lines = [
        "  ".join(
            c.rjust(w) if i >= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in shown
    ]
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more pods (a taller terminal shows them)")
    return lines


def eviction_lines(evictions: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    if not evictions:
        return ["EVICTIONS  none recently"]
    lines = [f"EVICTIONS  {len(evictions)} recent, newest first"]
    for e in evictions[:limit]:
        lines.append(f"  {clock(e.get('time'))}  {e.get('pod')}  by {e.get('by')}: {e.get('outcome')}")
    return lines


def plugin_line(plugins: Sequence[Mapping[str, Any]]) -> str:
    return "PLUGINS  " + " · ".join(f"{p.get('name')} {p.get('state')}" for p in plugins)


def render(
    doc: Mapping[str, Any],
    *,
    where: str,
    width: int | None = None,
    height: int | None = None,
    prev: Mapping[str, Any] | None = None,
) -> list[str]:
    """The view of ``doc``; with ``height`` the pod table is cut to fit (the live view), else all pods."""
    pods = doc.get("pods") or []
    evictions = doc.get("evictions") or []
    top = [header(doc, where, prev), *node_lines(doc), *be_lines(doc), ""]
    ev_limit = 5
    bottom = ["", *eviction_lines(evictions, ev_limit), plugin_line(doc.get("plugins") or [])]
    limit = None if height is None else max(height - len(top) - len(bottom) - 1, 2)
    lines = [*top, f"PODS {len(pods)}", *pod_lines(pods, limit), *bottom]
    if width is not None:
        lines = [line[:width] for line in lines]
    return lines
