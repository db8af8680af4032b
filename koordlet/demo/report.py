"""The demo's plot and summary, from its :class:`~koordlet.demo.timeline.Recording`: LS demand, BE use, what
the agent let BE use (one point per ``BECPUSuppress`` write in the audit log), the non-BE CPU each write
subtracted, and the system's CPU, in cores over seconds. The same numbers go into the PNG's ``tEXt`` chunk
as JSON, so the plot is checked against the audit log without reading pixels."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from koordlet import api
from koordlet.demo.chart import Series, line_chart
from koordlet.demo.timeline import Recording

PNG_KEY = "koordlet-demo"
OWNER = "BECPUSuppress"
REASON = re.compile(r"BE budget (-?\d+)m, non-BE (-?\d+)m")
BUSY_FRACTION = 0.25
"""CPU used outside the pods above this share of the node earns the summary a note."""
LS_COLOR, BE_COLOR, USE_COLOR = (215, 48, 39), (44, 100, 210), (40, 150, 60)


def allowance_of(event: dict[str, Any], be_cgroup: str, cpus: int) -> float | None:
    """Cores a BE-tier write allows, or ``None`` for any other event (pod and container levels too)."""
    if event.get("owner") != OWNER or event.get("phase", "final") != "final":
        return None
    path, after = str(event.get("path", "")), str(event.get("after", ""))
    if event.get("resource") == "cpu.cfs_quota_us" and path.endswith(f"/{be_cgroup}/cpu.cfs_quota_us"):
        quota = int(after)
        return float(cpus) if quota < 0 else quota / 100_000
    if event.get("resource") == "cpuset.cpus" and path.endswith(f"/{be_cgroup}/cpuset.cpus"):
        return float(len(api.parse_cpuset(after)))
    return None


def series(rec: Recording) -> dict[str, list[list[float]]]:
    docs = rec.docs
    be_cgroup = str(docs[0]["beCPU"]["cgroup"]) if docs else ""
    # The run ends with its last sample; the agent's restore at its stop is not part of it.
    end = docs[-1]["time"] if docs else rec.started_at + rec.duration
    start_value = float(rec.cpus)
    if docs and docs[0]["beCPU"].get("allowedCores") is not None:
        start_value = float(docs[0]["beCPU"]["allowedCores"])
    allowance: list[list[float]] = []
    non_be: list[list[float]] = []
    for e in rec.events:
        cores = allowance_of(e, be_cgroup, rec.cpus)
        if cores is None or e["time"] > end:
            continue
        if e["time"] <= rec.started_at:
            start_value = cores  # the setting in force when the run began
            continue
        allowance.append([rec.at(e["time"]), round(cores, 5), e["seq"]])
        m = REASON.search(str(e.get("reason", "")))
        if m:
            non_be.append([rec.at(e["time"]), int(m.group(2)) / 1000, e["seq"]])
    ls = [
        [
            rec.at(d["time"]),
            round(sum(p["cpuCores"] for p in d["pods"] if p["qos"] != "BE" and p["cpuCores"]), 4),
        ]
        for d in docs
    ]
    use = [
        [rec.at(d["time"]), round(d["beCPU"]["usedCores"], 4)]
        for d in docs
        if d["beCPU"]["usedCores"] is not None
    ]
    system = [
        [rec.at(d["time"]), round(d["node"]["systemCPUCores"], 4)]
        for d in docs
        if d["node"]["systemCPUCores"] is not None
    ]
    return {
        "lsDemand": ls,
        "beUse": use,
        "system": system,
        "beAllowance": [[0.0, round(start_value, 5), 0], *allowance],
        "nonBE": non_be,
    }


def data(rec: Recording) -> dict[str, Any]:
    return {
        "startedAt": rec.started_at,
        "durationSeconds": rec.duration,
        "cpus": rec.cpus,
        "spike": {
            "start": rec.spike[0],
            "end": rec.spike[1],
            "lsAskCores": rec.ls_spike,
            "lsIdleCores": rec.ls_idle,
        },
        "series": series(rec),
    }


def plot(doc: dict[str, Any], title: str) -> bytes:
    s = doc["series"]
    spike = doc["spike"]

    def xy(points: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
        return [(p[0], p[1]) for p in points]

    return line_chart(
        [
            Series("LS demand (LS pods' CPU)", LS_COLOR, xy(s["lsDemand"])),
            Series("BE allowance (agent's writes)", BE_COLOR, xy(s["beAllowance"]), step=True),
            Series("BE use", USE_COLOR, xy(s["beUse"])),
        ],
        x_max=doc["durationSeconds"],
        y_max=float(doc["cpus"]),
        title=title,
        x_label="seconds",
        y_label="CPU cores",
        span=(spike["start"], spike["end"], f"LS spike: +{spike['lsAskCores']:g} cores asked"),
        text={PNG_KEY: json.dumps(doc, separators=(",", ":"))},
    )


def _mean(points: Sequence[Sequence[float]], t0: float, t1: float) -> float | None:
    vals = [p[1] for p in points if t0 <= p[0] < t1]
    return sum(vals) / len(vals) if vals else None


def _value_at(steps: Sequence[Sequence[float]], t: float) -> float:
    return [p[1] for p in steps if p[0] <= t][-1]


def _c(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def summary(doc: dict[str, Any], node: str, policy: str, threshold: int) -> str:
    s, spike = doc["series"], doc["spike"]
    t_on, t_off, end = spike["start"], spike["end"], doc["durationSeconds"]
    allow = s["beAllowance"]
    before = _value_at(allow, t_on)
    cut = next((p for p in allow if t_on <= p[0] <= t_off and p[1] < before), None)
    low = min((p[1] for p in allow if t_on <= p[0] <= t_off), default=before)
    back = next((p for p in allow if p[0] > t_off and p[1] >= 0.9 * before), None)
    be_work = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(s["beUse"], s["beUse"][1:], strict=False))
    ls_spike = _mean(s["lsDemand"], (cut or [t_on])[0] + 1.0, t_off)
    asked = spike["lsIdleCores"] + spike["lsAskCores"]
    lines = [
        f"koordlet demo: BE CPU suppression on {node} ({doc['cpus']} CPUs, policy {policy}, "
        f"threshold {threshold}%), {end:g} s",
        f"Pods: LS 'web' (koord-prod) idles at {spike['lsIdleCores']:.2f} cores; "
        "3 BE 'batch' pods want the whole machine.",
        f"Before the spike:  LS used {_c(_mean(s['lsDemand'], t_on - 4, t_on))} cores; "
        f"BE allowed {before:.2f}, used {_c(_mean(s['beUse'], t_on - 4, t_on))}",
    ]
    if cut is not None:
        lines.append(
            f"LS spike at {t_on:.1f} s (+{spike['lsAskCores']:g} cores asked): the agent cut BE to "
            f"{cut[1]:.2f} cores {cut[0] - t_on:.2f} s later (audit seq {cut[2]:.0f})"
        )
    else:
        lines.append(f"LS spike at {t_on:.1f} s: BE was already at its floor ({before:.2f} cores)")
    lines += [
        f"During the spike:  LS used {_c(ls_spike)} of {asked:.2f} cores asked; BE allowed down to "
        f"{low:.2f}, used {_c(_mean(s['beUse'], (cut or [t_on])[0] + 1.0, t_off))}",
        f"After the spike:   BE allowance back to {back[1]:.2f} cores at {back[0]:.1f} s (it grows at most "
        "10% of the node per second)"
        if back is not None
        else f"After the spike:   BE allowance at {_value_at(allow, end):.2f} cores by the end",
        f"BE did {be_work:.1f} core-seconds of work in {end:g} s on CPU the LS pod left free.",
        f"Audit log: {len(allow) - 1} BE-tier writes by BECPUSuppress, plotted as 'BE allowance'.",
    ]
    busy = _mean(s["system"], 0, end)
    if busy is not None and busy > BUSY_FRACTION * doc["cpus"]:
        lines.append(
            f"Note: this machine was busy outside the demo ({busy:.2f} cores on average), which the budget "
            "subtracts: BE had less room than it would on a quiet machine."
        )
    return "\n".join(lines) + "\n"
