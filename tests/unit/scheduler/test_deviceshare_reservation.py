"""DeviceShare's reservation hooks, called as the Reservation plugin calls them (restore per node, filter and
score a nominated reservation, PreBind of a reserve pod), with reservations as the hooks receive them (uid,
reserve pod, owners, allocate policy): a matched reservation's GPU is the pod's to take, an unmatched one's
stays taken, the Restricted policy caps the pod at what the reservation has left, the nominated reservation
is the one allocated from at Reserve."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord.apis import device as dv
from koord.apis.deviceshare import ANNOTATION_DEVICE_ALLOCATED
from koord.scheduler.core.handle import PATCH_KEY
from koord.scheduler.framework import CycleState, PodInfo
from koord.scheduler.plugins.deviceshare.state import STATE_KEY
from koord.testing import pod
from koord.testing.devices import device, device_node, gpu
from tests.unit.scheduler.devicekit import run

CORE, RATIO, MEM = dv.RESOURCE_GPU_CORE, dv.RESOURCE_GPU_MEMORY_RATIO, dv.RESOURCE_GPU_MEMORY
WHOLE = {CORE: "100", RATIO: "100", MEM: "16Gi"}


@dataclass(frozen=True)
class Owner:
    namespace: str
    name: str


@dataclass(frozen=True)
class Reservation:
    uid: str
    pod: Mapping[str, Any]
    assigned: Mapping[str, Owner] = field(default_factory=dict)
    allocate_policy: str = ""


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
        self, r: Any, p: dict[str, Any], matched: Sequence[Reservation], unmatched: Sequence[Reservation] = ()
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
    reservation = Reservation("uid-rsv", rsv_pod)
    p = pod("p", requests={dv.RESOURCE_NVIDIA_GPU: "1"})
    assert Cycle(r, p, [reservation]).filter() == ""
    assert Cycle(r, p, [], [reservation]).filter() == "Insufficient GPU Devices"
    assert Cycle(r, p, []).filter() == "Insufficient GPU Devices"


def test_restricted_reservations_cap_the_pod_at_what_is_left() -> None:
    half = {CORE: "50", RATIO: "50", MEM: "8Gi"}
    rsv_pod = holding("rsv", 0)
    r = two_gpus(rsv_pod, holding("owner", 0, half))
    owned = {"uid-owner": Owner("default", "owner")}
    restricted = Reservation("uid-rsv", rsv_pod, owned, "Restricted")
    aligned = Reservation("uid-rsv", rsv_pod, owned, "Aligned")
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

    def __init__(self, reservation: Reservation) -> None:
        self.reservation = reservation

    def nominate(self, state: CycleState, p: Any, node: str) -> tuple[Reservation | None, None]:
        return self.reservation, None


def test_reserve_allocates_from_the_nominated_reservation() -> None:
    rsv_pod = holding("rsv", 1)
    # GPUs without topology: Koordinator's topology-scope allocator ignores which devices a reservation
    # prefers (only the default allocator ranks them first), and so does this port.
    r = two_gpus(rsv_pod, topology=False)
    reservation = Reservation("uid-rsv", rsv_pod)
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
    assert r.plugin.pre_bind_reservation(c.state, Reservation("uid-rsv", reserve_pod), "n") is None
    patch = c.state.read(PATCH_KEY)
    written = json.loads(patch["metadata"]["annotations"][ANNOTATION_DEVICE_ALLOCATED])
    assert written["gpu"][0]["minor"] == 0 and written["gpu"][0]["id"] == "GPU-0"
