"""kube-scheduler's node plugins in koord-scheduler: TaintToleration, NodeAffinity, NodePorts,
NodeUnschedulable, NodeName, SchedulingGates. Reasons are kube-scheduler's words (operators grep events
for them); every answer is checked on the batch path and node by node (see ``pluginrun``)."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import Code, PreFilterResult
from koord.scheduler.plugins import BUILTIN
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node, pod
from tests.support.scheduler.pluginrun import PluginRun


def _tainted(name: str, *taints: tuple[str, str, str]) -> dict[str, Any]:
    n = node(name)
    n["spec"] = {"taints": [{"key": k, "value": v, "effect": e} for k, v, e in taints]}
    return n


def _labelled(name: str, **labels: str) -> dict[str, Any]:
    return node(name, labels={k.replace("_", "/"): v for k, v in labels.items()})


def _with(p: dict[str, Any], **spec: Any) -> dict[str, Any]:
    p["spec"].update(spec)
    return p


# ---- TaintToleration ---------------------------------------------------------------------------------


def test_taints_keep_off_pods_that_do_not_tolerate_them() -> None:
    run = PluginRun(
        "TaintToleration",
        nodes=[
            _tainted("gpu", ("dedicated", "gpu", "NoSchedule")),
            _tainted("draining", ("maintenance", "", "NoExecute")),
            _tainted("soft", ("spot", "true", "PreferNoSchedule")),
            node("plain"),
        ],
    )
    assert run.reasons(pod("p")) == {
        "gpu": "unresolvable: node(s) had untolerated taint(s)",
        "draining": "unresolvable: node(s) had untolerated taint(s)",
        "soft": "",
        "plain": "",
    }
    exists = [{"key": "dedicated", "operator": "Exists"}]
    assert run.reasons(_with(pod("q"), tolerations=exists))["gpu"] == ""
    wrong_value = [{"key": "dedicated", "operator": "Equal", "value": "fpga", "effect": "NoSchedule"}]
    assert run.reasons(_with(pod("r"), tolerations=wrong_value))["gpu"].endswith("untolerated taint(s)")
    everything = [{"operator": "Exists"}]
    assert set(run.reasons(_with(pod("s"), tolerations=everything)).values()) == {""}


def test_prefer_no_schedule_taints_score_lower() -> None:
    run = PluginRun(
        "TaintToleration",
        nodes=[
            _tainted("two", ("a", "1", "PreferNoSchedule"), ("b", "1", "PreferNoSchedule")),
            _tainted("one", ("a", "1", "PreferNoSchedule")),
            node("none"),
        ],
    )
    assert run.scores(pod("p")) == {"two": 0, "one": 50, "none": 100}
    tolerate_a = [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}]
    assert run.scores(_with(pod("q"), tolerations=tolerate_a)) == {"two": 0, "one": 100, "none": 100}


# ---- NodeAffinity ------------------------------------------------------------------------------------

ERR_POD = "unresolvable: node(s) didn't match Pod's node affinity/selector"


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


NODES = [
    _labelled("a", zone="x", disk="ssd", cores="8"),
    _labelled("b", zone="y", disk="hdd", cores="32"),
    _labelled("c", zone="z"),
]


def test_node_selector_and_required_terms() -> None:
    run = PluginRun("NodeAffinity", nodes=NODES)
    assert run.reasons(pod("free")) == {"a": "", "b": "", "c": ""}
    assert run.pre_filter(pod("free")).code is Code.SKIP
    selector = _with(pod("sel"), nodeSelector={"disk": "ssd"})
    assert run.reasons(selector) == {"a": "", "b": ERR_POD, "c": ERR_POD}

    def passing(*terms: dict[str, Any]) -> set[str]:
        answer = run.reasons(_with(pod("p"), affinity=_required(*terms)))
        return {n for n, r in answer.items() if not r}

    assert passing({"matchExpressions": [_expr("zone", "In", "x", "y")]}) == {"a", "b"}
    assert passing({"matchExpressions": [_expr("zone", "NotIn", "x")]}) == {"b", "c"}
    assert passing({"matchExpressions": [_expr("disk", "Exists")]}) == {"a", "b"}
    assert passing({"matchExpressions": [_expr("disk", "DoesNotExist")]}) == {"c"}
    assert passing({"matchExpressions": [_expr("cores", "Gt", "10")]}) == {"b"}
    assert passing({"matchExpressions": [_expr("cores", "Lt", "10")]}) == {"a"}
    # Expressions of a term are ANDed, terms ORed; an empty term matches nothing.
    assert passing({"matchExpressions": [_expr("zone", "In", "x", "y"), _expr("disk", "In", "hdd")]}) == {"b"}
    assert passing(
        {"matchExpressions": [_expr("zone", "In", "x")]}, {"matchExpressions": [_expr("zone", "In", "z")]}
    ) == {"a", "c"}
    assert passing({}) == set()
    # nodeSelector and the affinity must both hold.
    both = _with(
        pod("both"),
        nodeSelector={"disk": "ssd"},
        affinity=_required({"matchExpressions": [_expr("zone", "In", "y")]}),
    )
    assert run.reasons(both) == {"a": ERR_POD, "b": ERR_POD, "c": ERR_POD}


def test_match_fields_narrow_the_search_in_prefilter() -> None:
    run = PluginRun("NodeAffinity", nodes=NODES)
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "c"]}]}
    p = _with(pod("p"), affinity=_required(by_name))
    result = run.pre_filter(p)
    assert isinstance(result, PreFilterResult) and result.node_names == frozenset({"a", "c"})
    assert run.reasons(p) == {"a": "", "b": ERR_POD, "c": ""}
    # Another term without matchFields allows every node, so no narrowing.
    other = {"matchExpressions": [_expr("zone", "In", "y")]}
    assert run.pre_filter(_with(pod("q"), affinity=_required(by_name, other))) is None


def test_added_affinity_applies_to_every_pod() -> None:
    args = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [_expr("zone", "NotIn", "z")]}]
            }
        }
    }
    run = PluginRun("NodeAffinity", args, nodes=NODES)
    enforced = "unresolvable: node(s) didn't match scheduler-enforced node affinity"
    assert run.reasons(pod("p")) == {"a": "", "b": "", "c": enforced}
    assert run.reasons(_with(pod("q"), nodeSelector={"zone": "x"})) == {"a": "", "b": ERR_POD, "c": enforced}


def test_preferred_terms_score_by_weight_normalised() -> None:
    run = PluginRun("NodeAffinity", nodes=NODES)
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [_expr("disk", "Exists")]}},
                {"weight": 30, "preference": {"matchExpressions": [_expr("zone", "In", "y")]}},
            ]
        }
    }
    # a: 10, b: 40, c: 0 -> x100 // 40.
    assert run.scores(_with(pod("p"), affinity=preferred)) == {"a": 25, "b": 100, "c": 0}
    assert run.scores(pod("free")) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"typo": 1}, "unknown field(s) typo"),
        ({"addedAffinity": {"required": {}}}, "addedAffinity: unknown field(s) required"),
    ],
)
def test_node_affinity_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgs, match=message.replace("(", r"\(").replace(")", r"\)")):
        PluginRun("NodeAffinity", args)


# ---- NodePorts, NodeUnschedulable, NodeName ----------------------------------------------------------


def _ports(name: str, *ports: tuple[int, str, str], node_name: str = "") -> dict[str, Any]:
    p = pod(name, node_name=node_name)
    p["spec"]["containers"][0]["ports"] = [
        {"containerPort": port, "hostPort": port, "protocol": proto, **({"hostIP": ip} if ip else {})}
        for port, proto, ip in ports
    ]
    return p


def test_host_ports_conflict_by_port_protocol_and_address() -> None:
    taken = "node(s) didn't have free ports for the requested pod ports"
    run = PluginRun(
        "NodePorts",
        nodes=[node("a"), node("b"), node("c")],
        pods=[
            _ports("web", (8080, "TCP", ""), node_name="a"),
            _ports("dns", (53, "UDP", "10.0.0.1"), node_name="b"),
        ],
    )
    assert run.reasons(_ports("p", (8080, "TCP", ""))) == {"a": taken, "b": "", "c": ""}
    assert run.reasons(_ports("q", (8080, "UDP", ""))) == {"a": "", "b": "", "c": ""}
    # A specific address conflicts with the same address and with 0.0.0.0, not with another address.
    assert run.reasons(_ports("r", (53, "UDP", "10.0.0.2"))) == {"a": "", "b": "", "c": ""}
    assert run.reasons(_ports("s", (53, "UDP", "10.0.0.1")))["b"] == taken
    assert run.reasons(_ports("t", (53, "UDP", "")))["b"] == taken
    # A pod without host ports is skipped in PreFilter.
    assert run.pre_filter(pod("plain")).code is Code.SKIP


def test_cordoned_nodes() -> None:
    cordoned = node("cordoned")
    cordoned["spec"] = {"unschedulable": True}
    run = PluginRun("NodeUnschedulable", nodes=[cordoned, node("open")])
    assert run.reasons(pod("p")) == {"cordoned": "unresolvable: node(s) were unschedulable", "open": ""}
    tolerant = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert run.reasons(_with(pod("q"), tolerations=tolerant)) == {"cordoned": "", "open": ""}


def test_node_name() -> None:
    run = PluginRun("NodeName", nodes=[node("a"), node("b")])
    assert run.reasons(pod("p")) == {"a": "", "b": ""}
    assert run.reasons(pod("q", node_name="b")) == {
        "a": "unresolvable: node(s) didn't match the requested node name",
        "b": "",
    }


def test_scheduling_gates_hold_a_pod_in_preenqueue() -> None:
    gates = BUILTIN["SchedulingGates"](None, None)
    assert gates.pre_enqueue(pod("free")) is None
    gated = _with(pod("p"), schedulingGates=[{"name": "example.com/quota"}, {"name": "wait"}])
    st = gates.pre_enqueue(gated)
    assert st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ("waiting for scheduling gates: [example.com/quota wait]",)


@pytest.mark.parametrize(
    "name", ["TaintToleration", "NodePorts", "NodeUnschedulable", "NodeName", "SchedulingGates"]
)
def test_plugins_without_args_refuse_args(name: str) -> None:
    with pytest.raises(ValueError, match="takes no args"):
        BUILTIN[name]({"x": 1}, None)
