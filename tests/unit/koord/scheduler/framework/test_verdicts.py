"""``explain`` runs inside the framework, so it cannot disagree with the cycle: a SKIP from PreFilter skips
that plugin's filter, PreScore runs before Score, and the per-plugin scores are the normalised ones whose
weighted sum is exactly what ``run_score`` (``/prioritize``) answers for the same nodes."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework import CycleState, NodeInfo
from koord.scheduler.framework.verdicts import explain, run_filter
from koord.scheduler.testing import run_score
from tests.unit.koord.scheduler.framework.test_runtime import NODES, Normalizing, framework


class Ordered(Normalizing):
    """Records call order: PreScore must come before any Score."""

    def pre_score(self, state: CycleState, pod: Any, nodes: Any) -> None:
        self.calls.append("pre_score")

    def score(self, state: CycleState, pod: Any, node_info: NodeInfo) -> int:
        self.calls.append("score")
        return super().score(state, pod, node_info)


def test_explain_agrees_with_the_cycle() -> None:
    fw = framework(
        {
            "plugins": {"multiPoint": {"enabled": [{"name": "N", "weight": 2}, {"name": "A"}]}},
            "pluginConfig": [
                {"name": "N", "args": {"scores": {"n1": 10, "n2": 40, "n3": 20}}},
                {"name": "A", "args": {"scores": {"n1": 90, "n2": 0, "n3": 50}, "reject": {"n3": "full"}}},
            ],
        }
    )
    pod = {"metadata": {"name": "p", "namespace": "d"}}
    docs = explain(fw, pod, NODES, ["n1", "n2", "n3"])
    state = CycleState()
    assert fw.run_pre_filter(state, pod) == (None, None)
    passed = run_filter(fw, state, pod, NODES).passed
    assert passed == ["n1", "n2"]
    cycle = run_score(fw, state, pod, [ni for ni in NODES if ni.name in passed])
    for name in passed:
        assert docs[name]["passes"] and docs[name]["extenderScore"] == cycle[name]
    # N's scores normalised over the nodes that pass (n2 is the top of n1, n2), not raw
    assert docs["n1"]["scores"]["N"] == 25 and docs["n2"]["scores"]["N"] == 100
    assert docs["n3"]["passes"] is False
    assert {v["plugin"]: v["filter"] for v in docs["n3"]["filter"]}["A"] == "full"
    assert docs["n3"]["scores"] == {}


def test_a_prefilter_skip_skips_that_filter_and_prescore_runs_before_score() -> None:
    fw = framework(
        {
            "plugins": {"multiPoint": {"enabled": [{"name": "A"}]}},
            "pluginConfig": [{"name": "A", "args": {"reject": {"n1": "no"}}}],
        }
    )
    docs = explain(fw, {"skip": "A"}, NODES, ["n1"])
    assert {v["plugin"]: v["filter"] for v in docs["n1"]["filter"]}["A"] == "skipped (PreFilter)"
    assert docs["n1"]["passes"]
    ordered = Ordered("O", {"scores": {"n1": 5}})
    fw.points["preScore"] = [*fw.points["preScore"], type(fw.points["score"][0])(ordered, 1)]
    fw.points["score"] = [type(fw.points["score"][0])(ordered, 1)]
    explain(fw, {}, NODES, ["n1"])
    assert ordered.calls.index("pre_score") < ordered.calls.index("score")
