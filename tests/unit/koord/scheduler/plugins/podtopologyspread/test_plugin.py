"""PodTopologySpread's filter through the real framework and scheduler: outcomes from kube-scheduler's
documented behaviour and the cases of its ``podtopologyspread`` filtering tests (skew per domain, missing
labels, namespaces, terminating pods, minDomains, node inclusion policies, matchLabelKeys), preemption's
AddPod/RemovePod, the queueing hints, and end-to-end spreads over three zones. Scores, default
constraints and args: ``test_podtopologyspread_scoring``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from koord.scheduler.framework import SKIP, Action, Code, CycleState, PodInfo
from koord.scheduler.framework.events import QUEUE
from koord.scheduler.framework.events import SKIP as QUEUE_SKIP
from koord.scheduler.plugins.podtopologyspread import PodTopologySpread
from koordshared.testing.objects import node, pod
from tests.support.scheduler.inmemory import SCHEDULER, InMemoryScheduler, only

NAME = "PodTopologySpread"
HOST = "kubernetes.io/hostname"
ZONE = "zone"
NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING = NOT_MATCH + " (missing required label)"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(
    skew: int, key: str, selector: Any = FOO, action: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": action, **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def incoming(
    *constraints: dict[str, Any], labels: Mapping[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    p = pod("p", labels={"foo": ""} if labels is None else labels, scheduler_name=SCHEDULER)
    if constraints:
        p["spec"]["topologySpreadConstraints"] = list(constraints)
    p["spec"].update(spec)
    return p


def placed(name: str, on: str, labels: Mapping[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return pod(name, node_name=on, labels={"foo": ""} if labels is None else labels, **kw)


def zoned(*names: str, zones: str = "1122") -> list[dict[str, Any]]:
    """Nodes ``names`` in zones ``zone<digit>`` (one digit per node), with a ``node`` label."""
    return [node(n, labels={ZONE: f"zone{z}", "node": n, HOST: n}) for n, z in zip(names, zones, strict=True)]


def spread_as(counts: str, nodes: str = "abxy") -> list[dict[str, Any]]:
    """Matching pods on node-a, node-b...: ``counts`` one digit per node."""
    return [
        placed(f"p-{n}{i}", f"node-{n}") for n, c in zip(nodes, counts, strict=True) for i in range(int(c))
    ]


FOUR = zoned("node-a", "node-b", "node-x", "node-y")


@pytest.fixture
def cluster() -> Iterator[InMemoryScheduler]:
    with InMemoryScheduler(only(NAME)) as s:
        yield s


def codes(s: InMemoryScheduler, p: dict[str, Any]) -> dict[str, Code | None]:
    """Filter's status code per node, node by node, after PreFilter."""
    plugin = s.framework.instances[NAME]
    state = s.state(p)
    assert plugin.pre_filter(state, p) is None
    out: dict[str, Code | None] = {}
    for ni in s.snapshot.infos:
        st = plugin.filter(state, p, ni)
        out[ni.name] = None if st is None else st.code
    return out


# ---- Filter --------------------------------------------------------------------------------------------


def test_no_existing_pods_every_node_fits(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR)
    assert set(cluster.filter(incoming(spread(1, ZONE))).values()) == {""}
    # the pod does not match its own selector: still fits everywhere
    assert set(cluster.filter(incoming(spread(1, ZONE, BAR))).values()) == {""}


def test_pods_of_other_namespaces_do_not_count(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR)
    cluster.add(
        placed("a1", "node-a", namespace="ns1"),
        placed("a2", "node-a", namespace="ns2"),
        placed("x1", "node-x"),
        placed("y1", "node-y"),
    )
    # zone1 counts 0, zone2 counts 2: 2 + 1 - 0 > 1
    assert cluster.filter(incoming(spread(1, ZONE))) == {
        "node-a": "",
        "node-b": "",
        "node-x": NOT_MATCH,
        "node-y": NOT_MATCH,
    }


def test_zones_three_three_every_node_fits(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("2103"))
    assert set(cluster.filter(incoming(spread(1, ZONE))).values()) == {""}


def test_a_node_without_the_key_is_unresolvable_and_not_counted(cluster: InMemoryScheduler) -> None:
    nodes = [*FOUR]
    nodes[1] = node("node-b", labels={"zon": "zone1", "node": "node-b"})
    cluster.add(*nodes, *spread_as("1111"))
    p = incoming(spread(1, ZONE))
    # zone1 = node-a only (1 pod); zone2 = 2 pods: 2 + 1 - 1 > 1
    assert cluster.filter(p) == {"node-a": "", "node-b": MISSING, "node-x": NOT_MATCH, "node-y": NOT_MATCH}
    assert codes(cluster, p) == {
        "node-a": None,
        "node-b": Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "node-x": Code.UNSCHEDULABLE,
        "node-y": Code.UNSCHEDULABLE,
    }


def test_no_node_has_the_key(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR)
    assert set(cluster.filter(incoming(spread(1, "rack"))).values()) == {MISSING}


@pytest.mark.parametrize(
    ("skew", "labels", "fits"),
    [
        (1, None, {"node-x"}),
        (2, None, {"node-b", "node-x"}),
        (1, {"bar": ""}, {"node-b", "node-x"}),  # the pod does not match itself: no +1
    ],
)
def test_spread_over_nodes_two_one_zero_three(
    cluster: InMemoryScheduler, skew: int, labels: dict[str, str] | None, fits: set[str]
) -> None:
    cluster.add(*FOUR, *spread_as("2103"))
    out = cluster.filter(incoming(spread(skew, "node"), labels=labels))
    assert {n for n, why in out.items() if not why} == fits
    assert {why for why in out.values() if why} == {NOT_MATCH}


def test_two_constraints_must_both_hold(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("2103"))
    p = incoming(spread(1, ZONE), spread(1, "node"))
    assert [n for n, why in cluster.filter(p).items() if not why] == ["node-x"]
    cluster.add(placed("p-y4", "node-y"))  # zones 3/4, nodes 2/1/0/4: zone1 or node-x, never both
    assert set(cluster.filter(p).values()) == {NOT_MATCH}


def test_terminating_pods_do_not_count(cluster: InMemoryScheduler) -> None:
    cluster.add(node("node-a", labels={"node": "node-a"}), node("node-b", labels={"node": "node-b"}))
    gone = placed("p-a", "node-a")
    gone["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    cluster.add(gone, placed("p-b", "node-b"))
    assert cluster.filter(incoming(spread(1, "node"))) == {"node-a": "", "node-b": NOT_MATCH}


def test_min_domains_counts_missing_domains_as_zero(cluster: InMemoryScheduler) -> None:
    cluster.add(*zoned("node-a", "node-b", "node-x", zones="123"), *spread_as("111", "abx"))
    # three domains with one pod each: global minimum 1, 1 + 1 - 1 <= 1
    assert set(cluster.filter(incoming(spread(1, ZONE, minDomains=3))).values()) == {""}
    # fewer domains than minDomains: the minimum is 0, so 1 + 1 - 0 > 1 everywhere
    assert set(cluster.filter(incoming(spread(1, ZONE, minDomains=4))).values()) == {NOT_MATCH}
    assert set(cluster.filter(incoming(spread(2, ZONE, minDomains=4))).values()) == {""}


def test_node_affinity_policy(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR, *spread_as("2103"))
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node", "operator": "In", "values": ["node-a", "node-y"]}]}
                ]
            }
        }
    }
    # Honor (default): only node-a and node-y count, 2/3, so node-a fits (NodeAffinity, not enabled
    # here, would keep the pod off node-b and node-x)
    honor = incoming(spread(1, "node"), affinity=affinity)
    assert cluster.filter(honor) == {"node-a": "", "node-b": "", "node-x": "", "node-y": NOT_MATCH}
    ignore = incoming(spread(1, "node", nodeAffinityPolicy="Ignore"), affinity=affinity)
    assert [n for n, why in cluster.filter(ignore).items() if not why] == ["node-x"]
    # a nodeSelector is node affinity too
    selected = incoming(spread(1, "node"), nodeSelector={"zone": "zone1"})
    assert [n for n, why in cluster.filter(selected).items() if why] == ["node-a"]  # 2 + 1 - 1 > 1


def test_node_taints_policy(cluster: InMemoryScheduler) -> None:
    tainted = node("node-a", labels={"node": "node-a"})
    tainted["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    cluster.add(tainted, node("node-b", labels={"node": "node-b"}), node("node-c", labels={"node": "node-c"}))
    cluster.add(placed("b1", "node-b"), placed("c1", "node-c"))
    # Ignore (default): node-a is a domain with 0 pods, so 1 + 1 - 0 > 1 on node-b and node-c
    assert cluster.filter(incoming(spread(1, "node"))) == {
        "node-a": "",
        "node-b": NOT_MATCH,
        "node-c": NOT_MATCH,
    }
    # Honor: node-a does not count, the minimum is 1
    honor = incoming(spread(1, "node", nodeTaintsPolicy="Honor"))
    assert set(cluster.filter(honor).values()) == {""}
    # ... unless the pod tolerates the taint
    tolerating = incoming(
        spread(1, "node", nodeTaintsPolicy="Honor"), tolerations=[{"key": "k", "operator": "Exists"}]
    )
    assert cluster.filter(tolerating) == {"node-a": "", "node-b": NOT_MATCH, "node-c": NOT_MATCH}


def test_match_label_keys_count_only_the_same_revision(cluster: InMemoryScheduler) -> None:
    cluster.add(node("node-a", labels={HOST: "node-a"}), node("node-b", labels={HOST: "node-b"}))
    old = {"app": "web", "pod-template-hash": "h1"}
    cluster.add(placed("o1", "node-a", labels=old), placed("o2", "node-a", labels=old))
    new = {"app": "web", "pod-template-hash": "h2"}
    web = {"matchLabels": {"app": "web"}}
    assert cluster.filter(incoming(spread(1, HOST, web), labels=new)) == {"node-a": NOT_MATCH, "node-b": ""}
    keyed = incoming(spread(1, HOST, web, matchLabelKeys=["pod-template-hash"]), labels=new)
    assert set(cluster.filter(keyed).values()) == {""}


def test_a_pod_without_hard_constraints_skips_the_filter(cluster: InMemoryScheduler) -> None:
    cluster.add(*FOUR)
    plugin = cluster.framework.instances[NAME]
    for p in (incoming(), incoming(spread(1, ZONE, action="ScheduleAnyway"))):
        assert plugin.pre_filter(CycleState(PodInfo(p)), p) is SKIP


# ---- preemption's what-ifs ---------------------------------------------------------------------------


def test_add_and_remove_pod_move_the_counts(cluster: InMemoryScheduler) -> None:
    cluster.add(node("node-a", labels={HOST: "node-a"}), node("node-b", labels={HOST: "node-b"}))
    victims = [placed("a1", "node-a"), placed("a2", "node-a")]
    cluster.add(*victims)
    p = incoming(spread(1, HOST))
    plugin = cluster.framework.instances[NAME]
    state = cluster.state(p)
    plugin.pre_filter(state, p)
    a, b = (cluster.snapshot.node_info(n) for n in ("node-a", "node-b"))
    assert a is not None and b is not None
    assert plugin.filter(state, p, a) is not None
    assert plugin.filter_nodes(state, p, cluster.snapshot.rotated(0)).tolist() == [  # kept for the cycle
        ni.name == "node-b" for ni in cluster.snapshot.infos
    ]
    what_if = state.clone()
    for v in victims:
        plugin.remove_pod(what_if, p, PodInfo(v), a)
    assert plugin.filter(what_if, p, a) is None
    assert plugin.filter(state, p, a) is not None  # the original state is untouched
    for i in range(2):
        plugin.add_pod(what_if, p, PodInfo(placed(f"n{i}", "node-b")), b)
    assert plugin.filter(what_if, p, b) is not None and plugin.filter(what_if, p, a) is None
    plugin.add_pod(what_if, p, PodInfo(placed("elsewhere", "node-b", namespace="other")), b)  # not counted
    plugin.add_pod(what_if, p, PodInfo(placed("x", "node-a", labels={"bar": ""})), a)  # not matching


# ---- queueing hints ----------------------------------------------------------------------------------------


def test_pod_events_requeue_only_for_matching_pods_of_the_namespace() -> None:
    plugin = PodTopologySpread(None, None)
    (pod_event, node_event) = plugin.events_to_register()
    assert (pod_event.event.resource, node_event.event.resource) == ("Pod", "Node")
    assert (
        pod_event.event.action
        == Action.ADD | Action.UPDATE_POD_LABEL | Action.UPDATE_POD_TOLERATIONS | Action.DELETE
    )
    assert (
        node_event.event.action
        == Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT
    )
    hint = pod_event.hint
    assert hint is not None
    p = incoming(spread(1, ZONE))
    assert hint(p, None, placed("new", "n1")) is QUEUE
    assert hint(p, None, placed("new", "n1", labels={"bar": ""})) is QUEUE_SKIP
    assert hint(p, None, pod("pending", labels={"foo": ""})) is QUEUE_SKIP  # not bound
    assert hint(p, None, placed("new", "n1", namespace="other")) is QUEUE_SKIP
    assert hint(p, placed("gone", "n1"), None) is QUEUE
    before, after = placed("q", "n1", labels={"bar": ""}), placed("q", "n1")
    assert hint(p, before, after) is QUEUE  # now matches
    assert hint(p, placed("q", "n1", labels={"foo": "", "x": "1"}), after) is QUEUE_SKIP  # still matches
    honor = incoming(spread(1, ZONE, nodeTaintsPolicy="Honor"))
    tolerating = {**honor, "spec": {**honor["spec"], "tolerations": [{"operator": "Exists"}]}}
    assert hint(honor, honor, tolerating) is QUEUE
    assert hint(p, p, {**p, "spec": {**p["spec"], "tolerations": [{"operator": "Exists"}]}}) is QUEUE_SKIP


def test_node_events_requeue_when_the_topology_keys_change() -> None:
    plugin = PodTopologySpread(None, None)
    hint = plugin.events_to_register()[1].hint
    assert hint is not None
    p = incoming(spread(1, ZONE))
    with_zone, without = node("n", labels={ZONE: "z1"}), node("n", labels={"x": "1"})
    assert hint(p, None, with_zone) is QUEUE
    assert hint(p, None, without) is QUEUE_SKIP
    assert hint(p, with_zone, None) is QUEUE
    assert hint(p, without, with_zone) is QUEUE
    assert hint(p, with_zone, node("n", labels={ZONE: "z2"})) is QUEUE
    assert hint(p, with_zone, node("n", labels={ZONE: "z1", "x": "1"})) is QUEUE_SKIP
    tainted = node("n", labels={ZONE: "z1"})
    tainted["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    assert hint(p, with_zone, tainted) is QUEUE


# ---- end to end -------------------------------------------------------------------------------------------


def test_a_deployment_spreads_over_three_zones_within_max_skew() -> None:
    with InMemoryScheduler(None) as s:  # kube-scheduler's default plugins
        for z in range(3):
            for n in range(3):
                s.add(node(f"z{z}-n{n}", labels={"topology.kubernetes.io/zone": f"z{z}", HOST: f"z{z}-n{n}"}))
        constraint = spread(1, "topology.kubernetes.io/zone", {"matchLabels": {"app": "web"}})
        for i in range(12):
            s.add(pod(f"web-{i}", labels={"app": "web"}, requests={"cpu": "100m"}, scheduler_name=SCHEDULER))
            p = s.pods.get(f"default/web-{i}")
            assert p is not None
            s.pods.put({**p, "spec": {**p["spec"], "topologySpreadConstraints": [constraint]}})
            s.schedule_all()
        per_zone = [sum(1 for n in s.placement().values() if n.startswith(f"z{z}-")) for z in range(3)]
        assert per_zone == [4, 4, 4]


def test_a_zone_no_pod_can_use_blocks_the_spread_with_kube_schedulers_message() -> None:
    with InMemoryScheduler(None) as s:
        for z in range(3):
            for n in range(3):
                nd = node(f"z{z}-n{n}", labels={"topology.kubernetes.io/zone": f"z{z}", HOST: f"z{z}-n{n}"})
                if z == 2:
                    nd["spec"]["taints"] = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
                s.add(nd)
        constraint = spread(1, "topology.kubernetes.io/zone", {"matchLabels": {"app": "web"}})
        for i in range(3):
            p = pod(f"web-{i}", labels={"app": "web"}, scheduler_name=SCHEDULER)
            p["spec"]["topologySpreadConstraints"] = [constraint]
            s.add(p)
            s.schedule_all()
        assert len(s.placement()) == 2  # one in z0, one in z1; z2 counts as an empty domain
        assert s.failures()["web-2"] == (
            "0/9 nodes are available: 3 node(s) had untolerated taint(s), "
            "6 node(s) didn't match pod topology spread constraints. preemption: 0/9 nodes are available: "
            "3 Preemption is not helpful for scheduling, 6 No preemption victims found for incoming pod."
        )
