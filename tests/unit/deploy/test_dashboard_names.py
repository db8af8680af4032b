"""The dashboards read koordlet's metric names, so a Koordinator operator's queries and ours are the same:
every ``koordlet_*`` series a panel reads is either Koordinator's (``koordlet/metricdefs.py``), in the
form Koordinator's koordlet exposes it (a counter by its bare name, a histogram by ``_bucket``/``_count``/
``_sum``, a gauge as it is), or one of this agent's own metrics that koordlet has no name for, each listed
in ``deploy/README.md``. That every query returns data is proven against a real Prometheus by
``tests/integration/test_dashboards.py``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from koordlet import metricdefs
from tests.support.dashboards import DASHBOARDS, load, queries

AGENT_OWN = {
    "koordlet_node_system_resource_usage": "gauge",
    "koordlet_node_be_resource": "gauge",
    "koordlet_pod_resource_usage": "gauge",
    "koordlet_collect_duration_seconds": "histogram",
    "koordlet_collect_lateness_seconds": "histogram",
    "koordlet_tick_lateness_seconds": "histogram",
    "koordlet_plugin_state": "gauge",
}
"""What the agent's dashboard shows that koordlet has no metric for: real-time system and BE usage, pod
usage, collection and tick lateness, the agent's collection cost, plugin states."""
FORMS = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def misnamed(doc: Mapping[str, Any]) -> list[str]:
    kinds = {d.name: d.kind for d in metricdefs.KOORDLET_METRICS} | AGENT_OWN
    problems = []
    for title, expr in queries(doc):
        for name in re.findall(r"\bkoordlet_[a-z0-9_]+", expr):
            forms = {base + suffix for base, kind in kinds.items() for suffix in FORMS[kind]}
            if name not in forms:
                near = [b for b in kinds if name.startswith(b)]
                hint = f" (koordlet's name: {near[0]})" if near else ""
                problems.append(f"{title}: {name}{hint}")
    return problems


def test_dashboards_use_koordlets_metric_names() -> None:
    docs = load()
    used = {n for doc in docs.values() for _, e in queries(doc) for n in re.findall(r"\bkoordlet_\w+", e)}
    assert len(used) >= 10, used  # the agent's dashboard was read
    assert [p for doc in docs.values() for p in misnamed(doc)] == []
    # prometheus_client's counter name and a name koordlet does not have are both caught
    targets = [{"expr": "rate(koordlet_pod_eviction_total[1m])"}, {"expr": "koordlet_no_such_metric"}]
    probe = {"panels": [{"title": "p", "targets": targets}]}
    assert misnamed(probe) == [
        "p: koordlet_pod_eviction_total (koordlet's name: koordlet_pod_eviction)",
        "p: koordlet_no_such_metric",
    ]


def test_the_agents_own_metrics_are_documented() -> None:
    readme = (DASHBOARDS.parent / "README.md").read_text()
    koordinators = {d.name for d in metricdefs.KOORDLET_METRICS}
    for name in AGENT_OWN:
        assert name not in koordinators, f"{name} is koordlet's: drop it from AGENT_OWN"
        assert f"`{name}`" in readme, f"deploy/README.md does not list {name}"
