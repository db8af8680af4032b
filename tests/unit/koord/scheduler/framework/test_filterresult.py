"""kube-scheduler v1.34's words, exactly, for each filter a pod fails and for the whole ``FailedScheduling``
message (``framework.FitError.Error``: the histogram sorted as strings, then DefaultPreemption's own
``preemption: 0/N nodes are available: ...``, the whole ending in one period)."""

from __future__ import annotations

from typing import Any

from koord.scheduler.framework.filterresult import fit_message
from koord.scheduler.framework.interface import Status
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import node, pod

S = "koord-scheduler"
RACK = "topology.test/rack"


def _node(name: str, cpu: str = "4", **spec: Any) -> dict[str, Any]:
    n = node(name, cpu, labels={"zone": "a", RACK: name, "kubernetes.io/hostname": name})
    n["spec"].update(spec)
    return n


def _the_pod() -> dict[str, Any]:
    p = pod("web", requests={"cpu": "1"}, labels={"app": "web"}, scheduler_name=S, priority=0)
    spec = p["spec"]
    spec["nodeSelector"] = {"zone": "a"}
    spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": RACK,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    spec["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    return p


def test_each_filter_and_the_whole_message_in_kube_scheduler_v1_34_words() -> None:
    k = MemoryScheduler({"profiles": [{"schedulerName": S}]})
    k.add_node(_node("cordoned", unschedulable=True))
    k.add_node(_node("tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    other_zone = _node("zone-b")
    other_zone["metadata"]["labels"]["zone"] = "b"
    k.add_node(other_zone)
    no_rack = _node("no-rack")
    del no_rack["metadata"]["labels"][RACK]
    k.add_node(no_rack)
    k.add_node(_node("full", cpu="2"))
    k.add_node(_node("ports"))
    k.add_node(_node("db"))
    # The pods already there are of the same priority: no victims for DefaultPreemption.
    k.add_pod(pod("busy", requests={"cpu": "1500m"}, node_name="full", priority=0))
    holder = pod("holder", node_name="ports", priority=0)
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    k.add_pod(holder)
    k.add_pod(pod("db-0", labels={"app": "db"}, node_name="db", priority=0))
    k.add_pod(_the_pod())
    k.run()
    assert not k.bound().get("default/web"), k.bound()
    (event,) = k.events("FailedScheduling")
    assert event[3] == (
        "0/7 nodes are available: "
        "1 Insufficient cpu, "
        "1 node(s) didn't have free ports for the requested pod ports, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't match pod anti-affinity rules, "
        "1 node(s) didn't match pod topology spread constraints (missing required label), "
        "1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. "
        "preemption: 0/7 nodes are available: "
        "3 No preemption victims found for incoming pod, "
        "4 Preemption is not helpful for scheduling."
    )


def test_a_prefilter_rejection_ends_in_one_period_even_when_it_quotes_a_fit_message() -> None:
    fit = fit_message(4, {"n0": Status.unschedulable("Insufficient cpu")})
    assert fit == "0/4 nodes are available: 1 Insufficient cpu."
    gang = Status.unresolvable(f"gang default/g: member default/g0 cannot be placed: {fit}")
    assert fit_message(4, {}, pre_filter=gang) == (
        "0/4 nodes are available: gang default/g: member default/g0 cannot be placed: "
        "0/4 nodes are available: 1 Insufficient cpu."
    )
    assert fit_message(4, {}, pre_filter=Status.unresolvable("node(s) didn't match")) == (
        "0/4 nodes are available: node(s) didn't match."
    )
