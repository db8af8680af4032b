"""InterPodAffinity's filter through the real framework and scheduler: outcomes from kube-scheduler's
documented behaviour and the cases of its ``interpodaffinity`` filtering tests (required affinity and
anti-affinity, existing pods' anti-affinity, the first pod of a group, namespaces and namespace
selectors, matchLabelKeys/mismatchLabelKeys), preemption's AddPod/RemovePod, the queueing hints, and
end-to-end placements. Scores and args: ``test_interpodaffinity_scoring``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from koord.scheduler.framework import SKIP, Action, Code, CycleState, PodInfo
from koord.scheduler.framework.events import QUEUE
from koord.scheduler.framework.events import SKIP as QUEUE_SKIP
from koord.scheduler.plugins.interpodaffinity import InterPodAffinity
from koordshared.testing.objects import node, pod
from tests.support.scheduler.inmemory import SCHEDULER, InMemoryScheduler, only

NAME = "InterPodAffinity"
HOST = "kubernetes.io/hostname"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
SCAN = {"service": "securityscan"}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def term(key: str, *exprs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": list(exprs)}, "topologyKey": key, **extra}


def affinity(
    required: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    preferred: list[tuple[int, dict[str, Any]]] | None = None,
    preferred_anti: list[tuple[int, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, req, pref in (("podAffinity", required, preferred), ("podAntiAffinity", anti, preferred_anti)):
        section: dict[str, Any] = {}
        if req:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = req
        if pref:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref
            ]
        if section:
            out[kind] = section
    return out


def incoming(
    labels: Mapping[str, str] | None = None, namespace: str = "default", **aff: Any
) -> dict[str, Any]:
    p = pod("p", namespace=namespace, labels=labels or {}, scheduler_name=SCHEDULER)
    if aff:
        p["spec"]["affinity"] = affinity(**aff)
    return p


def placed(
    name: str, on: str, labels: Mapping[str, str], namespace: str = "default", **aff: Any
) -> dict[str, Any]:
    p = pod(name, node_name=on, namespace=namespace, labels=labels)
    if aff:
        p["spec"]["affinity"] = affinity(**aff)
    return p


MACHINE1 = node("machine1", labels={"region": "r1", "zone": "z11"})


@pytest.fixture
def cluster() -> Iterator[InMemoryScheduler]:
    with InMemoryScheduler(only(NAME)) as s:
        yield s


def verdict(s: InMemoryScheduler, p: dict[str, Any], on: str = "machine1") -> str:
    return s.filter(p)[on]


def code(s: InMemoryScheduler, p: dict[str, Any], on: str = "machine1") -> Code | None:
    plugin = s.framework.instances[NAME]
    state = s.state(p)
    if plugin.pre_filter(state, p) is SKIP:
        return None
    ni = s.snapshot.node_info(on)
    assert ni is not None
    st = plugin.filter(state, p, ni)
    return None if st is None else st.code


# ---- Filter: the pod's required terms --------------------------------------------------------------------


def test_a_pod_without_terms_skips_the_filter_when_no_pod_has_anti_affinity(
    cluster: InMemoryScheduler,
) -> None:
    cluster.add(MACHINE1, placed("e", "machine1", SCAN))
    p = incoming({"security": "S1"})
    plugin = cluster.framework.instances[NAME]
    assert plugin.pre_filter(CycleState(PodInfo(p)), p) is SKIP
    assert verdict(cluster, p) == ""


@pytest.mark.parametrize(
    ("terms", "why"),
    [
        ([term("region", expr("service", "In", "securityscan", "value2"))], ""),
        ([term("region", expr("service", "NotIn", "securityscan3", "value3"))], ""),
        ([term("region", expr("service", "In", "antivirusscan", "value2"))], AFFINITY),
        (  # terms are ANDed, and so are the expressions of a selector
            [
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term("region", expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue")),
            ],
            "",
        ),
        (
            [
                term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                term(
                    "region", expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue")
                ),
            ],
            AFFINITY,
        ),
        ([term("rack", expr("service", "In", "securityscan"))], AFFINITY),  # the node lacks the key
    ],
)
def test_required_affinity(cluster: InMemoryScheduler, terms: list[dict[str, Any]], why: str) -> None:
    cluster.add(MACHINE1, placed("e", "machine1", SCAN))
    p = incoming({"security": "S1"}, required=terms)
    assert verdict(cluster, p) == why
    assert code(cluster, p) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE if why else None)


def test_required_affinity_only_counts_the_terms_namespaces(cluster: InMemoryScheduler) -> None:
    cluster.add(MACHINE1, placed("e", "machine1", SCAN, namespace="ns"))
    scan = expr("service", "In", "securityscan")
    assert (
        verdict(cluster, incoming(required=[term("region", scan, namespaces=["DiffNameSpace"])])) == AFFINITY
    )
    assert verdict(cluster, incoming(required=[term("region", scan)])) == AFFINITY  # its own namespace
    assert verdict(cluster, incoming(required=[term("region", scan, namespaces=["ns"])])) == ""
    assert verdict(cluster, incoming(required=[term("region", scan, namespaceSelector={})])) == ""  # all


def test_required_anti_affinity(cluster: InMemoryScheduler) -> None:
    cluster.add(MACHINE1, placed("e", "machine1", SCAN))
    scan = expr("service", "In", "securityscan", "value2")
    virus = expr("service", "In", "antivirusscan", "value2")
    # the node has no "node" label: the anti-affinity term cannot match there
    assert verdict(cluster, incoming(required=[term("region", scan)], anti=[term("node", virus)])) == ""
    p = incoming(required=[term("region", scan)], anti=[term("zone", scan)])
    assert verdict(cluster, p) == ANTI
    assert code(cluster, p) is Code.UNSCHEDULABLE


def test_existing_pods_anti_affinity_is_respected(cluster: InMemoryScheduler) -> None:
    scan = expr("service", "In", "securityscan", "value2")
    cluster.add(MACHINE1, placed("e", "machine1", SCAN, anti=[term("zone", scan)]))
    p = incoming(SCAN)  # no terms of its own
    assert verdict(cluster, p) == EXISTING
    assert code(cluster, p) is Code.UNSCHEDULABLE
    assert verdict(cluster, incoming({"service": "other"})) == ""


def test_existing_anti_affinity_not_matching_lets_the_pod_in(cluster: InMemoryScheduler) -> None:
    cluster.add(
        MACHINE1, placed("e", "machine1", SCAN, anti=[term("zone", expr("service", "NotIn", "securityscan"))])
    )
    assert verdict(cluster, incoming(SCAN)) == ""


def test_anti_affinity_is_checked_before_existing_pods_anti_affinity(cluster: InMemoryScheduler) -> None:
    cluster.add(
        MACHINE1, placed("e", "machine1", {"security": "S1"}, anti=[term("zone", expr("security", "Exists"))])
    )
    p = incoming(
        SCAN, anti=[term("region", expr("service", "Exists")), term("region", expr("security", "Exists"))]
    )
    assert verdict(cluster, p) == ANTI


def test_the_first_pod_of_a_group_may_go_anywhere_with_the_keys(cluster: InMemoryScheduler) -> None:
    cluster.add(
        node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}), node("c", labels={"rack": "r"})
    )
    web = {"app": "web"}
    first = incoming(web, required=[term("zone", expr("app", "In", "web"))])
    assert cluster.filter(first) == {"a": "", "b": "", "c": AFFINITY}
    # a pod that does not match its own term gets no such pass
    other = incoming({"app": "db"}, required=[term("zone", expr("app", "In", "web"))])
    assert set(cluster.filter(other).values()) == {AFFINITY}
    cluster.add(placed("w1", "b", web))
    assert cluster.filter(first) == {"a": AFFINITY, "b": "", "c": AFFINITY}


def test_namespace_selectors(cluster: InMemoryScheduler) -> None:
    namespaces = cluster.informers["namespaces"]
    for name, team in (("subteam1.team1", "team1"), ("subteam2.team1", "team1"), ("subteam1.team2", "team2")):
        namespaces.put(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}}
        )
    cluster.add(MACHINE1, placed("e", "machine1", SCAN, namespace="subteam1.team1"))
    scan = expr("service", "In", "securityscan")
    team1 = {"matchLabels": {"team": "team1"}}
    team2 = {"matchLabels": {"team": "team2"}}
    assert verdict(cluster, incoming(required=[term("region", scan, namespaceSelector=team1)])) == ""
    assert verdict(cluster, incoming(required=[term("region", scan, namespaceSelector=team2)])) == AFFINITY
    # an existing pod's anti-affinity selects the incoming pod's namespace by its labels
    cluster.add(placed("guard", "machine1", {"x": "1"}, anti=[term("zone", scan, namespaceSelector=team2)]))
    assert verdict(cluster, incoming(SCAN, namespace="subteam1.team2")) == EXISTING
    assert verdict(cluster, incoming(SCAN, namespace="subteam2.team1")) == ""


def test_match_and_mismatch_label_keys(cluster: InMemoryScheduler) -> None:
    cluster.add(node("a", labels={HOST: "a"}), node("b", labels={HOST: "b"}))
    cluster.add(placed("old", "a", {"app": "web", "pod-template-hash": "h1"}))
    web = expr("app", "In", "web")
    new = {"app": "web", "pod-template-hash": "h2"}
    assert cluster.filter(incoming(new, anti=[term(HOST, web)])) == {"a": ANTI, "b": ""}
    keyed = term(HOST, web, matchLabelKeys=["pod-template-hash"])
    assert set(cluster.filter(incoming(new, anti=[keyed])).values()) == {""}
    # tenants keep apart: avoid pods of any other tenant
    cluster.add(placed("t1", "a", {"tenant": "t1"}), placed("t2", "b", {"tenant": "t2"}))
    apart = term(HOST, expr("tenant", "Exists"), mismatchLabelKeys=["tenant"])
    assert cluster.filter(incoming({"tenant": "t2"}, anti=[apart])) == {"a": ANTI, "b": ""}


def test_a_malformed_selector_is_unresolvable(cluster: InMemoryScheduler) -> None:
    cluster.add(MACHINE1)
    p = incoming(required=[term("region", expr("service", "Sometimes", "x"))])
    plugin = cluster.framework.instances[NAME]
    st = plugin.pre_filter(CycleState(PodInfo(p)), p)
    assert st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message.startswith("parsing pod: ")


# ---- preemption's what-ifs -----------------------------------------------------------------------------


def test_add_and_remove_pod_move_the_counts(cluster: InMemoryScheduler) -> None:
    scan = expr("service", "In", "securityscan")
    guard = placed("guard", "machine1", {"x": "1"}, anti=[term("zone", scan)])
    cluster.add(MACHINE1, guard)
    p = incoming(
        SCAN,
        required=[term("region", expr("app", "In", "db"))],
        anti=[term("zone", expr("app", "In", "web"))],
    )
    plugin = cluster.framework.instances[NAME]
    state = cluster.state(p)
    assert plugin.pre_filter(state, p) is None
    ni = cluster.snapshot.node_info("machine1")
    assert ni is not None
    assert plugin.filter(state, p, ni) is not None  # no db pod anywhere, and the pod is not one
    assert plugin.filter_nodes(state, p, cluster.snapshot.rotated(0)).tolist() == [False]  # kept
    what_if = state.clone()
    plugin.add_pod(what_if, p, PodInfo(placed("db", "machine1", {"app": "db"})), ni)
    st = plugin.filter(what_if, p, ni)
    assert st is not None and st.message == EXISTING  # affinity now holds; the guard still blocks
    plugin.remove_pod(what_if, p, PodInfo(guard), ni)
    assert plugin.filter(what_if, p, ni) is None
    plugin.add_pod(what_if, p, PodInfo(placed("web", "machine1", {"app": "web"})), ni)
    st = plugin.filter(what_if, p, ni)
    assert st is not None and st.message == ANTI
    st = plugin.filter(state, p, ni)
    assert st is not None and st.message == AFFINITY  # the original state is untouched


# ---- queueing hints ------------------------------------------------------------------------------------


def test_hints() -> None:
    plugin = InterPodAffinity(None, None)
    pod_event, node_event = plugin.events_to_register()
    assert pod_event.event.action == Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE
    assert node_event.event.action == Action.ADD | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT
    on_pod, on_node = pod_event.hint, node_event.hint
    assert on_pod is not None and on_node is not None
    p = incoming(
        SCAN,
        required=[term("region", expr("app", "In", "db"))],
        anti=[term("zone", expr("app", "In", "web"))],
    )
    db, web, other = (
        placed("d", "n", {"app": "db"}),
        placed("w", "n", {"app": "web"}),
        placed("o", "n", {"app": "x"}),
    )
    assert on_pod(p, None, db) is QUEUE
    assert on_pod(p, None, other) is QUEUE_SKIP
    assert on_pod(p, None, pod("pending", labels={"app": "db"})) is QUEUE_SKIP  # not bound
    assert on_pod(p, web, None) is QUEUE
    assert on_pod(p, other, None) is QUEUE_SKIP
    assert on_pod(p, other, {**other, "metadata": {**other["metadata"], "labels": {"app": "db"}}}) is QUEUE
    assert on_pod(p, web, {**web, "metadata": {**web["metadata"], "labels": {"app": "x"}}}) is QUEUE
    assert (
        on_pod(p, other, {**other, "metadata": {**other["metadata"], "labels": {"app": "y"}}}) is QUEUE_SKIP
    )
    assert on_node(p, None, node("n", labels={"region": "r"})) is QUEUE
    assert on_node(p, None, node("n", labels={"zone": "z"})) is QUEUE
    assert on_node(p, None, node("n", labels={"rack": "r"})) is QUEUE_SKIP


# ---- end to end ----------------------------------------------------------------------------------------


def nine_nodes(s: InMemoryScheduler) -> None:
    for z in range(3):
        for n in range(3):
            s.add(node(f"z{z}-n{n}", labels={"topology.kubernetes.io/zone": f"z{z}", HOST: f"z{z}-n{n}"}))


def test_required_anti_affinity_places_one_per_node_then_fails_with_kube_schedulers_message() -> None:
    with InMemoryScheduler(None) as s:  # kube-scheduler's default plugins
        nine_nodes(s)
        one_per_node = [term(HOST, expr("app", "In", "web"))]
        for i in range(10):
            p = pod(f"web-{i}", labels={"app": "web"}, requests={"cpu": "100m"}, scheduler_name=SCHEDULER)
            p["spec"]["affinity"] = affinity(anti=one_per_node)
            s.add(p)
            s.schedule_all()
        placement = s.placement()
        assert len(placement) == 9 and len(set(placement.values())) == 9
        assert s.failures() == {
            "web-9": "0/9 nodes are available: 9 node(s) didn't match pod anti-affinity rules. "
            "preemption: 0/9 nodes are available: 9 No preemption victims found for incoming pod."
        }


def test_required_affinity_follows_the_first_pod_into_its_zone() -> None:
    with InMemoryScheduler(None) as s:
        nine_nodes(s)
        together = [term("topology.kubernetes.io/zone", expr("app", "In", "cache"))]
        for i in range(6):
            p = pod(f"cache-{i}", labels={"app": "cache"}, scheduler_name=SCHEDULER)
            p["spec"]["affinity"] = affinity(required=together)
            s.add(p)
            s.schedule_all()
        zones = {n.split("-")[0] for n in s.placement().values()}
        assert len(s.placement()) == 6 and len(zones) == 1
