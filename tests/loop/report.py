"""What the colocation loop found (:class:`Report`), what it must have found (:func:`problems`: the
acceptance of the loop, used by the command's exit status and by its end-to-end test) and how it is
summed up for a reader (:func:`summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.loop import configs


@dataclass
class Placement:
    """Where koord-scheduler put a pod, and what its ``/debug/explain`` said of each node beforehand."""

    pod: str
    node: str = ""
    filtered: dict[str, str] = field(default_factory=dict)
    """Nodes a Filter plugin rejected, with the reason."""
    scores: dict[str, int] = field(default_factory=dict)
    """LoadAwareScheduling's score of each node that passed."""


@dataclass
class Report:
    reported_before: dict[str, float] = field(default_factory=dict)
    """Each node's reported cpu usage (%) once the hot load is steady."""
    low_percent: int = configs.LOW_CPU_PERCENT
    high_percent: int = 0
    scheduler_percent: int = configs.SCHEDULER_CPU_PERCENT
    """LoadAwareScheduling's cpu threshold the run used (configs.thresholds)."""
    probe: Placement | None = None
    explain: dict[str, dict[str, Any]] = field(default_factory=dict)
    """koord-scheduler's ``/debug/explain`` of the probe, per node."""
    dry_run_decisions: list[str] = field(default_factory=list)
    dry_run_pods_left: int = 0
    dry_run_events: int = 0
    counted_rounds: int = 0
    """Rounds the real descheduler saw loop-a over its threshold before its first eviction."""
    evicted: list[str] = field(default_factory=list)
    hot_after: float = 0.0
    replacements: dict[str, str] = field(default_factory=dict)
    """replacement pod -> its node."""
    events: int = 0
    exit_codes: dict[str, int] = field(default_factory=dict)


def describe(out: Placement) -> str:
    text = f"{out.pod} -> {out.node or 'nowhere'}"
    if out.filtered:
        text += "; filtered out " + ", ".join(f"{n} ({why})" for n, why in sorted(out.filtered.items()))
    if out.scores:
        text += "; LoadAware scores " + ", ".join(f"{n} {s}" for n, s in sorted(out.scores.items()))
    return text


def problems(r: Report, hot: str, cold: tuple[str, ...]) -> list[str]:
    """Every way the run fell short of the loop's story (empty: it told it all)."""
    out = []
    if not r.reported_before.get(hot, 0) > r.high_percent:
        out.append(f"{hot}'s NodeMetric did not report it over the threshold ({r.reported_before})")
    if any(r.reported_before.get(c, 100) >= r.low_percent for c in cold):
        out.append(f"the cold nodes did not report under {r.low_percent}% ({r.reported_before})")
    probe = r.probe
    if probe is None or probe.node not in cold or hot not in probe.filtered:
        out.append(f"koord-scheduler did not keep the new pod off {hot}: {probe}")
    scores = probe.scores if probe is not None else {}
    if not all(scores.get(c, 0) > scores.get(hot, 0) for c in cold):
        out.append(f"koord-scheduler did not score the cold nodes higher: {scores}")
    if not r.dry_run_decisions or r.dry_run_pods_left != 5 or r.dry_run_events:
        out.append(
            f"the dry run decided {r.dry_run_decisions}, left {r.dry_run_pods_left} of 5 pods, "
            f"recorded {r.dry_run_events} Events"
        )
    if r.counted_rounds < 2:
        out.append(
            f"the descheduler evicted after {r.counted_rounds} counted rounds (anomaly count 2: 3 rounds)"
        )
    n = len(r.evicted)
    if not r.evicted or r.evicted != configs.EVICTION_ORDER[:n]:
        out.append(f"evictions {r.evicted} are not a prefix of Koordinator's order {configs.EVICTION_ORDER}")
    if not r.hot_after <= r.high_percent:
        out.append(f"{hot} still at {r.hot_after:.0f}% after the evictions (threshold {r.high_percent}%)")
    if r.events != n:
        out.append(f"{r.events} Descheduled Events for {n} evictions")
    misplaced = {p: node for p, node in r.replacements.items() if node not in cold}
    if len(r.replacements) < n or misplaced:
        out.append(f"replacements {r.replacements} not all scheduled onto the cold nodes")
    failed = {name: code for name, code in r.exit_codes.items() if code != 0}
    if failed:
        out.append(f"processes exited with errors: {failed}")
    return out


def summary(r: Report, hot: str) -> str:
    would = ", ".join(dict.fromkeys(r.dry_run_decisions)) or "nothing"
    lines = [
        "The colocation loop:",
        "  reported cpu: " + ", ".join(f"{n} {v:.0f}%" for n, v in sorted(r.reported_before.items())),
        f"  new pod: {describe(r.probe) if r.probe else 'not scheduled'}",
        f"  dry run: would evict {would}; evicted nothing",
        f"  descheduler: {hot} abnormal after {r.counted_rounds + 1} rounds over {r.high_percent}%;"
        f" evicted {', '.join(r.evicted) or 'nothing'} (Eviction API, {r.events} Events)",
        f"  {hot} after: {r.hot_after:.0f}% cpu; replacements: "
        + (", ".join(f"{p} -> {n}" for p, n in sorted(r.replacements.items())) or "none"),
    ]
    return "\n".join(lines)
