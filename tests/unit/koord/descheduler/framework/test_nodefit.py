"""Node predicates (NodeFit: selector and required affinity, taints, requests, schedulability) and the
RemovePodsViolatingNodeAffinity plugin built on them."""

from __future__ import annotations

from typing import Any

import pytest

from koord.descheduler.framework.nodefit import NodeFit
from koordshared.apis.core.node import is_ready, matches_node_selector, untolerated_taints
from koordshared.testing import objects
from tests.support.descheduler import Env


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


@pytest.mark.parametrize(
    ("spec", "labels", "fits"),
    [
        ({"nodeSelector": {"disk": "ssd"}}, {"disk": "ssd"}, True),
        ({"nodeSelector": {"disk": "ssd"}}, {"disk": "hdd"}, False),
        ({"affinity": affinity(expr("zone", "In", "a", "b"))}, {"zone": "b"}, True),
        ({"affinity": affinity(expr("zone", "NotIn", "a"))}, {}, True),
        ({"affinity": affinity(expr("gpu", "Exists"))}, {"gpu": "1"}, True),
        ({"affinity": affinity(expr("gpu", "DoesNotExist"))}, {"gpu": "1"}, False),
        ({"affinity": affinity(expr("cores", "Gt", "8"))}, {"cores": "16"}, True),
        ({"affinity": affinity(expr("cores", "Lt", "8"))}, {"cores": "16"}, False),
        (
            {"affinity": affinity(expr("zone", "In", "a"), expr("zone", "In", "c"))},
            {"zone": "c"},
            True,
        ),  # ORed
        ({"affinity": affinity({})}, {"zone": "a"}, False),  # an empty term matches nothing
        (
            {
                "affinity": affinity(
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                )
            },
            {},
            True,
        ),
    ],
)
def test_node_selector_and_required_affinity(
    spec: dict[str, Any], labels: dict[str, str], fits: bool
) -> None:
    pod = objects.pod("p")
    pod["spec"].update(spec)
    assert matches_node_selector(pod, objects.node("n", labels=labels)) is fits


def test_taints_and_tolerations() -> None:
    node = objects.node("n")
    node["spec"] = {
        "taints": [
            {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
            {"key": "soft", "effect": "PreferNoSchedule"},  # not a NoSchedule/NoExecute taint: ignored
        ]
    }
    pod = objects.pod("p")
    assert untolerated_taints(pod, node) == ["dedicated=db:NoSchedule"]
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "db"}]
    assert untolerated_taints(pod, node) == []
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert untolerated_taints(pod, node) == []
    pod["spec"]["tolerations"] = [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]
    assert untolerated_taints(pod, node) == ["dedicated=db:NoSchedule"]


def test_requests_must_fit_what_the_node_has_left() -> None:
    node = objects.node("n", cpu="4", memory="8Gi")
    placed = [
        objects.pod(f"x{i}", node_name="n", requests={"cpu": "1500m", "memory": "1Gi"}) for i in range(2)
    ]
    fit = NodeFit(lambda name: placed if name == "n" else [])
    assert fit.fits(objects.pod("ok", requests={"cpu": "1"}), node)
    assert fit.reasons(objects.pod("big", requests={"cpu": "1001m"}), node) == ["insufficient cpu"]
    assert fit.reasons(objects.pod("gpu", requests={"nvidia.com/gpu": "1"}), node) == [
        "insufficient nvidia.com/gpu"
    ]
    node["spec"] = {"unschedulable": True}
    assert "node is not schedulable" in fit.reasons(objects.pod("ok"), node)


def test_readiness() -> None:
    assert is_ready(objects.node("n"))
    assert is_ready({"metadata": {"name": "no-conditions"}})
    assert not is_ready({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})


def test_pods_whose_node_no_longer_matches_their_affinity_are_evicted_where_another_node_takes_them() -> None:
    env = Env(
        {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]},
        plugin="RemovePodsViolatingNodeAffinity",
        point="deschedule",
    )
    env.node("a", labels={"zone": "x"})  # relabelled after scheduling: the pods wanted zone y
    env.node("b", labels={"zone": "y"})
    wants_y = {"affinity": affinity(expr("zone", "In", "y"))}
    wants_z = {"affinity": affinity(expr("zone", "In", "z"))}
    for name, spec in (("moves", wants_y), ("stays-nowhere-else", wants_z), ("no-affinity", {})):
        p = env.pod(name, "a")
        p = dict(p)
        p["spec"] = {**p["spec"], **spec}
        env.informers.pods.put(p)
    env.pod("fine", "b").get("spec", {}).update(wants_y)
    assert env.round() == ["default/moves"]
    assert env.recorder.evicted[0][2].reason == "pod's required node affinity no longer matches node a"


def test_node_affinity_args() -> None:
    from koordshared.runtime.errors import PluginError

    with pytest.raises(PluginError, match="preferredDuringSchedulingIgnoredDuringExecution not supported"):
        Env(
            {"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]},
            plugin="RemovePodsViolatingNodeAffinity",
            point="deschedule",
        )
    with pytest.raises(PluginError, match="nodeAffinityType: required"):
        Env({}, plugin="RemovePodsViolatingNodeAffinity", point="deschedule")
