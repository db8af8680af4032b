"""The FrameworkExtender's reservation hooks as a plugin with fine-grained state (NodeNUMAResource,
DeviceShare) implements them: given back the room on the node, asked at Filter and at nomination, scored,
told which reservation the pod takes at Reserve, and binding a reserve pod through
``pre_bind_reservation`` whose patch lands on the Reservation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import CycleState, NodeInfo, Obj, ReservationInfo, Status
from koord.scheduler.framework.extension import (
    ReservationFilterPlugin,
    ReservationHooks,
    ReservationHooksUser,
    ReservationPreBindPlugin,
    ReservationRestorePlugin,
    ReservationScorePlugin,
)
from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import FakeClock, node
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.scheduler.reservationkit import S, add, allocated_to, get, owner, profile

WEB = {"app": "web"}


class Probe:
    """Records what the hooks were given; vetoes by reservation name; scores by a label."""

    name = "Probe"

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.handle = handle
        self.calls: list[tuple[Any, ...]] = []
        self.hooks: ReservationHooks | None = None

    def use_reservation_hooks(self, hooks: ReservationHooks) -> None:
        self.hooks = hooks

    def pre_restore_reservation(self, state: CycleState, pod: Obj) -> Status | None:
        self.calls.append(("pre_restore", pod["metadata"]["name"]))
        return None

    def restore_reservation(
        self,
        state: CycleState,
        pod: Obj,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
        node_info: NodeInfo,
    ) -> tuple[Any, Status | None]:
        held = [r.name for r in matched if r.uid in node_info.pods]
        self.calls.append(("restore", node_info.name, sorted(r.name for r in matched), held))
        return None, None

    def filter_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        if reservation.name == "vetoed":
            return Status.unschedulable("Probe: no CPUs left in the reservation")
        return None

    def filter_nominate_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        return Status.unschedulable("not this one") if reservation.name == "skipped" else None

    def score_reservation(
        self, state: CycleState, pod: Obj, reservation: ReservationInfo, node_name: str
    ) -> int:
        return int(reservation.labels.get("probe-score", "0"))

    def reserve(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        assert self.hooks is not None
        chosen, _ = self.hooks.nominate(state, pod, node_name)
        self.calls.append(("reserve", pod["metadata"]["name"], chosen.name if chosen else ""))
        return None

    def unreserve(self, state: CycleState, pod: Obj, node_name: str) -> None:
        return None

    def pre_bind(self, state: CycleState, pod: Obj, node_name: str) -> Status | None:
        self.calls.append(("pre_bind", pod["metadata"]["name"]))
        return None

    def pre_bind_reservation(
        self, state: CycleState, reservation: ReservationInfo, node_name: str
    ) -> Status | None:
        self.calls.append(("pre_bind_reservation", reservation.name, reservation.node_name))
        self.handle.patch_pod(state, {"metadata": {"annotations": {"probe/cpus": "0-1"}}})
        return None


def probe_kit() -> tuple[MemoryScheduler, Probe]:
    p = profile()
    for point in ("reserve", "preBind"):
        enabled = p["plugins"][point]["enabled"]
        enabled.insert(0, {"name": "Probe"})
    k = MemoryScheduler({"profiles": [p]}, plugins={"Probe": Probe}, clock=FakeClock())
    k.add_node(node("a", "16", "16Gi"))
    return k, k.scheduler.profiles[S].instances["Probe"]


def test_the_probe_implements_every_hook() -> None:
    probe = Probe(None, None)
    for proto in (
        ReservationRestorePlugin,
        ReservationFilterPlugin,
        ReservationScorePlugin,
        ReservationPreBindPlugin,
        ReservationHooksUser,
    ):
        assert isinstance(probe, proto), proto


def test_a_reserve_pod_binds_through_pre_bind_reservation_and_its_patch_lands_on_the_reservation() -> None:
    k, probe = probe_kit()
    add(k, reservation("r1", {"cpu": "2"}))
    k.run()
    assert ("pre_bind_reservation", "r1", "a") in probe.calls
    assert not [c for c in probe.calls if c[0] == "pre_bind"]  # a reserve pod is no pod
    assert get(k, "r1")["metadata"]["annotations"]["probe/cpus"] == "0-1"
    assert get(k, "r1")["status"]["phase"] == "Available"


def test_restore_gets_the_node_without_the_matched_reserve_pods() -> None:
    k, probe = probe_kit()
    add(k, available(reservation("r1", {"cpu": "2"}, owners=[owner_labels(WEB)]), "a"))
    k.add_pod(owner("web", "1", WEB))
    k.run()
    assert ("pre_restore", "web") in probe.calls
    assert ("restore", "a", ["r1"], []) in probe.calls  # r1's reserve pod is no longer on the node
    assert ("reserve", "web", "r1") in probe.calls  # the plugin knows the pod's reservation at Reserve


def test_filter_and_nomination_vetoes_and_scores_decide_the_reservation() -> None:
    k, _ = probe_kit()
    for name, score in (("vetoed", "90"), ("skipped", "80"), ("low", "10"), ("high", "50")):
        r = reservation(name, {"cpu": "2"}, owners=[owner_labels(WEB)], labels={"probe-score": score})
        add(k, available(r, "a"))
    k.add_pod(owner("web", "1", WEB))
    k.run()
    assert allocated_to(k, "web") == "high"


def test_a_filter_veto_is_the_pods_reason_when_it_must_use_a_reservation() -> None:
    k, _ = probe_kit()
    add(k, available(reservation("vetoed", {"cpu": "2"}, owners=[owner_labels(WEB)]), "a"))
    aff = {"scheduling.koordinator.sh/reservation-affinity": '{"name": "vetoed"}'}
    k.add_pod(owner("web", "1", WEB, annotations=aff))
    k.run()
    (msg,) = [e[3] for e in k.events("FailedScheduling") if e[0] == "default/web"]
    assert "1 Probe: no CPUs left in the reservation" in msg, msg
    assert "1 Reservation(s) exactly matches the requested reservation name" in msg, msg
