"""What the fault tests read from a running agent: its exposition, its descriptors and its log."""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from koordlet.testing.agent import Agent, http_get

Sample = tuple[dict[str, str], float]


def scrape(agent: Agent) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of one ``/metrics`` scrape as ``(name, labels, value)``."""
    status, body = http_get(agent.base + "/metrics", timeout=10)
    assert status == 200, body[:300]
    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    ]


def samples(agent: Agent, name: str, **match: str) -> list[Sample]:
    """Samples of ``name`` (or, for a counter, ``name_total``) on ``/metrics`` whose labels include
    ``match``."""
    return [
        (labels, value)
        for got, labels, value in scrape(agent)
        if got in (name, f"{name}_total") and all(labels.get(k) == v for k, v in match.items())
    ]


def total(agent: Agent, name: str, **match: str) -> float:
    return sum(v for _labels, v in samples(agent, name, **match))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def tracebacks(agent: Agent) -> list[str]:
    """Each traceback in the agent's log, whole (a fault must cost log lines, not tracebacks)."""
    lines = Path(agent.log).read_text(errors="replace").splitlines()
    blocks: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            # The whole block up to the exception line, so a failing assertion shows the cause.
            end = i + 1
            while end < len(lines) and (lines[end].startswith(" ") or lines[end] == ""):
                end += 1
            blocks.append("\n".join(lines[i : end + 1]))
    return blocks


def read_int(path: Path) -> int:
    return int(path.read_text().strip())
