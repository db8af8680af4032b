"""DeviceShare's reservation hooks, called as the Reservation plugin calls them (restore per node, filter and
score a nominated reservation, PreBind of a reserve pod), with reservations as the hooks receive them (the
framework's ReservationInfo of an available Reservation, with the owners placed in it): a matched
reservation's GPU is the pod's to take, an unmatched one's stays taken, the Restricted policy caps the pod
at what the reservation has left, the nominated reservation is the one allocated from at Reserve."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from koord.scheduler.core.handle import PATCH_KEY
from koord.scheduler.framework import CycleState, PodInfo, PodRequirement, ReservationInfo
from koord.scheduler.plugins.deviceshare.state import STATE_KEY
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension.deviceshare import ANNOTATION_DEVICE_ALLOCATED
from koordshared.apis.scheduling import device as dv
from koordshared.testing import FakeClock, pod
from koordshared.testing.devices import device, device_node, gpu
from koordshared.testing.reservations import available, owner_labels, reservation
from tests.support.scheduler import reservationkit
from tests.support.scheduler.devicekit import run

CORE, RATIO, MEM = dv.RESOURCE_GPU_CORE, dv.RESOURCE_GPU_MEMORY_RATIO, dv.RESOURCE_GPU_MEMORY
WHOLE = {CORE: "100", RATIO: "100", MEM: "16Gi"}


def placed(
    uid: str, owners: Mapping[str, str] = MappingProxyType({}), policy: str | None = None
) -> ReservationInfo:
    """An available reservation on ``n`` whose reserve pod is ``default/<uid>`` (its name is the uid), with
    ``owners`` (pod name -> uid) placed in it."""
    r = available(reservation(f"r-{uid}", {dv.RESOURCE_NVIDIA_GPU: "1"}, uid=uid, policy=policy), "n")
    return ReservationInfo.of(r, [PodRequirement("default", n, u, {}) for n, u in owners.items()])


def holding(name: str, minor: int, resources: Mapping[str, str] = WHOLE) -> dict[str, Any]:
    return pod(
        name,
        node_name="n",
        annotations={
            ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": minor, "resources": dict(resources)}]})
        },
    )


class Cycle:
    """One pod's cycle through the hooks on node ``n``."""

    def __init__(
        self,
        r: Any,
        p: dict[str, Any],
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo] = (),
    ) -> None:
        self.r, self.pod = r, p
        self.state = CycleState(PodInfo(p))
        self.plugin = r.plugin
        assert self.plugin.pre_filter(self.state, p) is None
        assert self.plugin.pre_restore_reservation(self.state, p) is None
        self.node = r.snapshot.node_info("n")
        _, st = self.plugin.restore_reservation(self.state, p, matched, unmatched, self.node)
        assert st is None

    def filter(self) -> str:
        st = self.plugin.filter(self.state, self.pod, self.node)
        return "" if st is None else st.message

    def reserve(self) -> list[int]:
        assert self.plugin.reserve(self.state, self.pod, "n") is None
        return [a.minor for a in self.state.read(STATE_KEY).result["gpu"]]


def two_gpus(*pods: dict[str, Any], topology: bool = True) -> Any:
    numa = 0 if topology else None
    return run([device_node("n", gpus=2)], [device("n", gpu(0, numa=numa), gpu(1, numa=numa))], pods)


def test_a_matched_reservation_gives_its_gpu_to_the_pod_and_an_unmatched_one_keeps_it() -> None:
    rsv_pod = holding("rsv", 0)
    r = two_gpus(rsv_pod, holding("other", 1))
    reservation = placed("rsv")
    p = pod("p", requests={dv.RESOURCE_NVIDIA_GPU: "1"})
    assert Cycle(r, p, [reservation]).filter() == ""
    assert Cycle(r, p, [], [reservation]).filter() == "Insufficient GPU Devices"
    assert Cycle(r, p, []).filter() == "Insufficient GPU Devices"


def test_restricted_reservations_cap_the_pod_at_what_is_left() -> None:
    half = {CORE: "50", RATIO: "50", MEM: "8Gi"}
    rsv_pod = holding("rsv", 0)
    r = two_gpus(rsv_pod, holding("owner", 0, half))
    owned = {"owner": "uid-owner"}
    restricted = placed("rsv", owned, "Restricted")
    aligned = placed("rsv", owned, "Aligned")
    whole = pod("w", requests={dv.RESOURCE_NVIDIA_GPU: "1"})
    # Half of the reserved GPU is its owner's: a whole GPU cannot come from the Restricted reservation...
    st = r.plugin.filter_nominate_reservation(Cycle(r, whole, [restricted]).state, whole, restricted, "n")
    assert st is not None and st.message.startswith("Reservation(s) ")
    # ... but Aligned lets the pod take the node's free GPU beside it.
    assert r.plugin.filter_nominate_reservation(Cycle(r, whole, [aligned]).state, whole, aligned, "n") is None
    small = pod("s", requests={CORE: "50", RATIO: "50"})
    assert (
        r.plugin.filter_nominate_reservation(Cycle(r, small, [restricted]).state, small, restricted, "n")
        is None
    )
    assert 0 <= r.plugin.score_reservation(Cycle(r, small, [restricted]).state, small, restricted, "n") <= 100


class Nominating:
    """The profile's hooks as DeviceShare sees them: the Reservation plugin nominated ``reservation``."""

    def __init__(self, reservation: ReservationInfo) -> None:
        self.reservation = reservation

    def nominate(self, state: CycleState, p: Any, node: str) -> tuple[ReservationInfo | None, None]:
        return self.reservation, None


def test_reserve_allocates_from_the_nominated_reservation() -> None:
    rsv_pod = holding("rsv", 1)
    # GPUs without topology: Koordinator's topology-scope allocator ignores which devices a reservation
    # prefers (only the default allocator ranks them first), and so does this port.
    r = two_gpus(rsv_pod, topology=False)
    reservation = placed("rsv")
    p = pod("p", requests={dv.RESOURCE_NVIDIA_GPU: "1"})
    # Without a nomination the node's free GPU (0) is taken, the reserved one stays for its owners.
    assert Cycle(r, p, [reservation]).reserve() == [0]
    r.plugin.unreserve(Cycle(r, p, [reservation]).state, p, "n")
    r.plugin.use_reservation_hooks(Nominating(reservation))
    assert Cycle(r, pod("q", requests={dv.RESOURCE_NVIDIA_GPU: "1"}), [reservation]).reserve() == [1]


def test_a_reserve_pods_devices_are_written_on_its_reservation() -> None:
    r = two_gpus()
    reserve_pod = pod("rsv", requests={dv.RESOURCE_NVIDIA_GPU: "1"})
    c = Cycle(r, reserve_pod, [])
    assert c.reserve() == [0]
    assert r.plugin.pre_bind_reservation(c.state, placed("rsv"), "n") is None
    patch = c.state.read(PATCH_KEY)
    written = json.loads(patch["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])
    assert written["gpu"][0]["minor"] == 0 and written["gpu"][0]["id"] == "GPU-0"


def together() -> MemoryScheduler:
    """Reservation and DeviceShare in one profile (Koordinator's points), on a node whose allocatable lists
    four GPUs but whose Device two: DeviceShare, not NodeResourcesFit, is the one to say what is left."""
    prof = reservationkit.profile(extra=("DeviceShare",))
    prof["plugins"]["score"]["enabled"].append({"name": "DeviceShare", "weight": 1})
    k = MemoryScheduler({"profiles": [prof]}, clock=FakeClock())
    k.add_node(device_node("n", gpus=4))
    k.informers["devices"].put(device("n", gpu(0), gpu(1)))
    return k


def gpu_pod(name: str, **kw: Any) -> dict[str, Any]:
    requests = {dv.RESOURCE_NVIDIA_GPU: "1"}
    return pod(name, requests=requests, scheduler_name=reservationkit.S, uid=f"uid-{name}", **kw)


def gpus_of(k: MemoryScheduler, name: str) -> list[int]:
    raw = ((k.pods.get(f"default/{name}") or {}).get("metadata") or {}).get("annotations", {})
    return [a["minor"] for a in json.loads(raw[ANNOTATION_DEVICE_ALLOCATED])["gpu"]]


def test_a_gpu_reserved_by_a_reservation_is_its_owners_and_nobody_elses() -> None:
    k = together()
    wanted = {dv.RESOURCE_NVIDIA_GPU: "1"}
    reservationkit.add(k, reservation("r1", wanted, owners=[owner_labels({"app": "train"})]))
    k.run()
    placed_r = reservationkit.get(k, "r1")
    assert placed_r["status"]["phase"] == "Available" and placed_r["status"]["nodeName"] == "n"
    # PreBindReservation wrote the reserved GPU on the Reservation.
    held = json.loads(placed_r["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])["gpu"]
    (reserved,) = [a["minor"] for a in held]
    k.add_pod(gpu_pod("other"))
    k.add_pod(gpu_pod("third"))
    k.run()
    # A pod the reservation does not match gets the free GPU; the next one none (the reserved GPU is kept).
    assert k.bound() == {"default/other": "n"} and gpus_of(k, "other") == [1 - reserved]
    (failed,) = k.events("FailedScheduling")
    assert failed[0] == "default/third" and "1 Insufficient GPU Devices" in failed[3]

    # A restarted scheduler learns the reserved GPU from the Reservation, the other from the pod.
    again = together()
    reservationkit.add(again, placed_r)
    bound_other = k.pods.get("default/other")
    assert bound_other is not None
    again.add_pod(bound_other)
    again.add_pod(gpu_pod("third"))
    again.run()
    assert "default/third" not in again.bound()
    again.stop()

    # The owner gets the reserved GPU, in the reservation.
    k.add_pod(gpu_pod("train", labels={"app": "train"}))
    k.run()
    assert k.bound()["default/train"] == "n" and gpus_of(k, "train") == [reserved]
    assert reservationkit.allocated_to(k, "train") == "r1"
    k.stop()
