"""NodeResourcesFit and NodeResourcesBalancedAllocation against kube-scheduler's words and formulas, each
answer checked on the batch path and node by node (see ``pluginrun``)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koord.scheduler.plugins.noderesources import BALANCED, FIT, scoring
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node, pod
from tests.support.scheduler.pluginrun import PluginRun

GI = 1024**3


def _gpu_node(name: str, gpus: str) -> dict[str, Any]:
    n = node(name, "8", "16Gi")
    for part in ("allocatable", "capacity"):
        n["status"][part]["example.com/gpu"] = gpus
    return n


def _with_gpu(p: dict[str, Any], count: str) -> dict[str, Any]:
    p["spec"]["containers"][0]["resources"].setdefault("requests", {})["example.com/gpu"] = count
    return p


# ---- Filter ------------------------------------------------------------------------------------------


def test_fit_names_every_short_resource_and_is_unresolvable_only_above_allocatable() -> None:
    run = PluginRun(
        FIT,
        nodes=[node("a", "4", "8Gi"), node("b", "4", "8Gi")],
        pods=[pod("busy", node_name="a", requests={"cpu": "3", "memory": "7Gi"})],
    )
    assert run.reasons(pod("p", requests={"cpu": "2", "memory": "2Gi"})) == {
        "a": "Insufficient cpu, Insufficient memory",
        "b": "",
    }
    # More than the node's whole allocatable: preemption could not help (kube: UnschedulableAndUnresolvable).
    assert run.reasons(pod("big", requests={"cpu": "5"})) == {
        "a": "unresolvable: Insufficient cpu",
        "b": "unresolvable: Insufficient cpu",
    }
    # A pod asking for nothing fits a full node.
    assert run.reasons(pod("none")) == {"a": "", "b": ""}


def test_fit_counts_pods_against_the_node_pod_allocatable() -> None:
    run = PluginRun(
        FIT,
        nodes=[node("a", pods="2"), node("b", pods="3")],
        pods=[pod(f"x{i}", node_name=n) for i, n in enumerate(["a", "a", "b", "b"])],
    )
    assert run.reasons(pod("p")) == {"a": "Too many pods", "b": ""}


def test_fit_takes_the_larger_of_init_containers_and_containers() -> None:
    run = PluginRun(
        FIT, nodes=[node("a", "4", "8Gi")], pods=[pod("busy", node_name="a", requests={"cpu": "2"})]
    )
    p = pod("p", requests={"cpu": "1"})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    assert run.reasons(p) == {"a": "Insufficient cpu"}
    p["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "2"
    assert run.reasons(p) == {"a": ""}


def test_fit_checks_extended_resources_unless_ignored() -> None:
    nodes = [_gpu_node("gpu", "1"), node("plain", "8", "16Gi")]
    p = _with_gpu(pod("p", requests={"cpu": "1"}), "2")
    assert PluginRun(FIT, nodes=nodes).reasons(p) == {
        "gpu": "unresolvable: Insufficient example.com/gpu",
        "plain": "unresolvable: Insufficient example.com/gpu",
    }
    by_name = PluginRun(FIT, {"ignoredResources": ["example.com/gpu"]}, nodes=nodes)
    assert by_name.reasons(p) == {"gpu": "", "plain": ""}
    by_group = PluginRun(FIT, {"ignoredResourceGroups": ["example.com"]}, nodes=nodes)
    assert by_group.reasons(p) == {"gpu": "", "plain": ""}


def test_fit_never_ignores_native_resources() -> None:
    # kube-scheduler ignores extended resources only: cpu and kubernetes.io/ names are checked whatever
    # ignoredResources says.
    n = node("a", "1", "1Gi")
    n["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "1000"
    args = {
        "ignoredResources": ["cpu", "kubernetes.io/batch-cpu"],
        "ignoredResourceGroups": ["kubernetes.io"],
    }
    run = PluginRun(FIT, args, nodes=[n])
    p = pod("p", requests={"cpu": "2"})
    p["spec"]["containers"][0]["resources"]["requests"]["kubernetes.io/batch-cpu"] = "2000"
    assert run.reasons(p) == {"a": "unresolvable: Insufficient cpu, Insufficient kubernetes.io/batch-cpu"}


# ---- Score -------------------------------------------------------------------------------------------


def _scored(args: dict[str, Any] | None, plugin: str = FIT) -> dict[str, int] | None:
    run = PluginRun(
        plugin,
        args,
        nodes=[node("a", "4", "8Gi"), node("b", "8", "8Gi")],
        pods=[pod("busy", node_name="a", requests={"cpu": "1", "memory": "2Gi"})],
    )
    return run.scores(pod("p", requests={"cpu": "1", "memory": "2Gi"}))


def test_least_allocated() -> None:
    # a: cpu 2/4 -> 50, memory 4/8 -> 50; b: cpu (8000-1000)*100//8000 = 87, memory 75; (87+75)//2 = 81.
    assert _scored(None) == {"a": 50, "b": 81}
    weighted = {
        "scoringStrategy": {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}
    }
    # b: (87*3 + 75) // 4 = 84
    assert _scored(weighted) == {"a": 50, "b": 84}


def test_most_allocated() -> None:
    # b: cpu 1000*100//8000 = 12, memory 25; (12+25)//2 = 18.
    assert _scored({"scoringStrategy": {"type": "MostAllocated"}}) == {"a": 50, "b": 18}


def test_requested_to_capacity_ratio_shape() -> None:
    shape = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    args: dict[str, Any] = {
        "scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}
    }
    # b: cpu utilization 12 -> 88, memory 25 -> 75, math.Round((88+75)/2) = 82.
    assert _scored(args) == {"a": 50, "b": 82}
    bin_packing = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    args["scoringStrategy"]["requestedToCapacityRatio"]["shape"] = bin_packing
    # a: 50 and 50; b: 12 and 25 -> math.Round(18.5) = 19 (half away from zero, not to even).
    assert _scored(args) == {"a": 50, "b": 19}


def test_requested_to_capacity_ratio_rounds_halves_up() -> None:
    shape = [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    args = {
        "scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}
    }
    run = PluginRun(FIT, args, nodes=[node("a", "10", "100Gi")])
    # cpu 20% -> 80, memory 19% -> 81: 80.5, which Go's math.Round makes 81 (numpy's round would say 80).
    assert run.scores(pod("p", requests={"cpu": "2", "memory": "19Gi"})) == {"a": 81}


def test_scoring_counts_a_pod_without_requests_as_100m_and_200mb() -> None:
    run = PluginRun(FIT, nodes=[node("a", "1", str(400 * 1024 * 1024))])
    # cpu (1000-100)*100//1000 = 90, memory (400-200)/400 -> 50: (90+50)//2 = 70.
    assert run.scores(pod("p")) == {"a": 70}


def test_extended_resource_scored_only_when_requested() -> None:
    args = {
        "scoringStrategy": {
            "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 1}]
        }
    }
    run = PluginRun(FIT, args, nodes=[_gpu_node("gpu", "4"), node("plain", "8", "16Gi")])
    # Without a gpu request only cpu counts: (8000-1000)*100//8000 = 87 on both.
    assert run.scores(pod("p", requests={"cpu": "1"})) == {"gpu": 87, "plain": 87}
    # With one: gpu (4-1)*100//4 = 75 -> (87+75)//2 = 81; the node without gpus scores cpu alone.
    assert run.scores(_with_gpu(pod("q", requests={"cpu": "1"}), "1")) == {"gpu": 81, "plain": 87}


def test_balanced_allocation() -> None:
    run = PluginRun(BALANCED, nodes=[node("a", "4", "8Gi"), node("b", "8", "8Gi")])
    # a: 0.25 and 0.25 -> 100; b: 0.125 and 0.25 -> (1 - 0.0625) * 100 = 93.
    assert run.scores(pod("p", requests={"cpu": "1", "memory": "2Gi"})) == {"a": 100, "b": 93}
    # A pod requesting none of the resources is skipped (PreScore SKIP), not scored 100 everywhere.
    assert run.scores(pod("none")) is None


def test_balanced_allocation_three_resources_uses_the_standard_deviation() -> None:
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]}
    run = PluginRun(BALANCED, args, nodes=[_gpu_node("a", "4")])
    # cpu 2/8 = 0.25, memory 8/16 = 0.5, gpu 3/4 = 0.75: std = sqrt(1/24) = 0.2041 -> 79.
    p = _with_gpu(pod("p", requests={"cpu": "2", "memory": "8Gi"}), "3")
    assert run.scores(p) == {"a": 79}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"scoringStrategy": {"type": "Spread"}}, "scoringStrategy.type: 'Spread' is not one of"),
        ({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}}, "must be in the range [1, 100]"),
        ({"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}}, "duplicate resource 'cpu'"),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            "at least one point is required",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                    },
                }
            },
            "sorted in increasing order",
        ),
        ({"ignoredResourceGroups": ["example.com/gpu"]}, "must not contain '/'"),
        ({"scoringStrategy": {"typo": 1}}, "unknown field(s) typo"),
    ],
)
def test_fit_args_validation(args: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgs, match=re.escape(message)):
        PluginRun(FIT, args)


def _kube_balanced(requested: list[int], allocatable: list[int]) -> int:
    """kube-scheduler's ``balancedResourceScorer`` for one node, as its Go code computes it."""
    fractions = [min(r / a, 1.0) for r, a in zip(requested, allocatable, strict=True) if a != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * 100)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.lists(
            st.tuples(
                st.lists(st.integers(0, 10**12), min_size=k, max_size=k),
                st.lists(st.sampled_from([0, 1, 3, 1000, 4000, 10**9, 32 * 2**30]), min_size=k, max_size=k),
            ),
            min_size=1,
            max_size=6,
        )
    )
)
def test_balanced_scores_every_node_as_kube_scheduler_does(nodes: list[tuple[list[int], list[int]]]) -> None:
    req = np.asarray([r for r, _ in nodes], dtype=np.int64).T
    alloc = np.asarray([a for _, a in nodes], dtype=np.int64).T
    assert scoring.balanced(req, alloc).tolist() == [_kube_balanced(r, a) for r, a in nodes]
