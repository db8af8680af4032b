"""koord-scheduler's bookkeeping around a binding that does not happen, in memory (informers fed by hand,
a recording API): the room an assumed pod held is given back and the pods waiting for it are requeued;
a node gone before Bind fails the binding; an assumed pod deleted before its binding was seen leaves
the cache; the pod's own status write requeues nothing; writes stop at the fence; a point that disables a
plugin and lists it again keeps the point's order."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord.scheduler import app
from koord.scheduler.cache.cache import Cache
from koord.scheduler.config import parse_configuration
from koord.scheduler.core.api import APIFailed, FencedAPI, MemoryAPI
from koord.scheduler.core.eventhandlers import EventHandlers
from koord.scheduler.core.handle import SchedulerHandle
from koord.scheduler.core.metrics import SchedulerMetrics
from koord.scheduler.core.scheduler import Scheduler
from koord.scheduler.framework.snapshot import Snapshot
from koord.scheduler.framework.waiting import WaitingPods
from koord.scheduler.plugins import plugin_registry
from koordlet.testing.wait import wait_until
from koordshared.kube.informers import MemoryInformerSet
from koordshared.testing import objects


class Hold:
    """PreBind: holds each binding until ``release`` is set (a long PreBind, a volume being bound)."""

    name = "Hold"

    def __init__(self, args: Any, handle: Any) -> None:
        self.release = threading.Event()
        self.held = threading.Event()

    def pre_bind(self, state: Any, pod: Any, node: str) -> None:
        self.held.set()
        assert self.release.wait(10)


class Custom:
    name = "Custom"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def bind(self, state: Any, pod: Any, node: str) -> None:
        return None


class Env:
    def __init__(self) -> None:
        self.informers = MemoryInformerSet(app.watches())
        self.pods, self.nodes = self.informers["pods"], self.informers["nodes"]
        self.api = MemoryAPI(on_bind=self._bound)
        self.cache = Cache()
        self.handle = SchedulerHandle(Snapshot(), self.informers, self.api, WaitingPods())
        registry = plugin_registry()
        self.hold: list[Hold] = []

        def hold(args: Any, handle: Any) -> Hold:
            self.hold.append(Hold(args, handle))
            return self.hold[-1]

        registry.register("Hold", hold)
        profile = {"plugins": {"preBind": {"enabled": [{"name": "Hold"}]}}}
        conf = parse_configuration({"profiles": [profile]}, registered=frozenset(registry.names()))
        self.sched = Scheduler(
            app.build_frameworks(conf, registry, self.handle),
            self.api,
            SchedulerMetrics(CollectorRegistry()),
            cache=self.cache,
            snapshot=self.handle.snapshot(),
            waiting=self.handle.waiting,
            pods=self.pods,
        )
        EventHandlers(self.sched).attach(self.pods, self.nodes)

    def _bound(self, pod: Mapping[str, Any], node: str) -> None:
        current = self.pods.get(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
        if current is not None:
            self.pods.put({**current, "spec": {**current["spec"], "nodeName": node}})

    def pod(self, name: str, cpu: str = "1") -> dict[str, Any]:
        pod = objects.pod(name, requests={"cpu": cpu}, scheduler_name="koord-scheduler")
        self.pods.put(pod)
        return pod

    def cycle(self) -> None:
        assert self.sched.schedule_next(timeout=5)

    def where(self, pod: Mapping[str, Any]) -> str | None:
        return self.sched.queue.where(pod["metadata"]["uid"])

    @property
    def held(self) -> threading.Event:
        return self.hold[0].held

    def release(self) -> None:
        self.hold[0].release.set()


@pytest.fixture
def env() -> Iterator[Env]:
    e = Env()
    yield e
    e.release()
    e.sched.stop()


def test_a_failed_binding_requeues_the_pods_waiting_for_its_room(env: Env) -> None:
    env.nodes.put(objects.node("n1", cpu="2"))
    env.api.fail_bind = lambda pod, node: "refused" if pod["metadata"]["name"] == "a" else ""
    a = env.pod("a", cpu="2")
    env.cycle()
    assert env.held.wait(5)  # a is assumed, its binding held in PreBind
    b = env.pod("b", cpu="2")
    env.cycle()
    assert env.where(b) == "unschedulable"  # Insufficient cpu: a holds the room
    env.release()
    assert wait_until(lambda: env.where(a) == "backoff", 5)
    assert env.where(b) == "backoff"  # a's room is free again: b is retried after its backoff
    assert env.cache.counts() == (1, 0, 0)


def test_a_node_deleted_before_bind_fails_the_binding(env: Env) -> None:
    env.nodes.put(objects.node("n1"))
    p = env.pod("p")
    env.cycle()
    assert env.held.wait(5)
    env.nodes.remove("n1")
    env.release()
    assert wait_until(lambda: env.where(p) == "unschedulable", 5)
    assert env.api.bindings == {}
    assert env.cache.counts() == (0, 0, 0)
    (event,) = [e for e in env.api.events if e[2] == "FailedScheduling"]
    assert event[3] == "node n1 was deleted while the pod was being bound"


def test_an_assumed_pod_deleted_before_its_binding_was_seen_leaves_the_cache(env: Env) -> None:
    env.nodes.put(objects.node("n1", cpu="2"))
    env.api._on_bind = None  # bound on the server, but the watch never says so (a 410 gap)
    env.release()
    a = env.pod("a", cpu="2")
    env.cycle()
    assert wait_until(lambda: env.api.bindings, 5)
    b = env.pod("b", cpu="2")
    env.cycle()
    assert env.where(b) == "unschedulable"
    env.pods.remove("default/a")  # the re-list's deletion, of the object last seen unbound
    assert env.cache.counts() == (1, 0, 0)
    assert env.where(b) == "backoff"
    assert env.where(a) is None


def test_the_pods_own_status_write_requeues_nothing(env: Env) -> None:
    tainted = objects.node("n1")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    env.nodes.put(tainted)  # TaintToleration rejects them, and it registered unscheduled pods' updates
    big = env.pod("big", cpu="4")
    env.cycle()
    assert env.where(big) == "unschedulable"
    other = env.pod("other", cpu="8")
    env.cycle()
    assert env.where(other) == "unschedulable"
    # the PodScheduled=False condition comes back from the API server: status and version only
    written = {
        **big,
        "metadata": {**big["metadata"], "resourceVersion": "9"},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
    }
    env.pods.put(written)
    assert env.where(big) == env.where(other) == "unschedulable"
    env.pods.put({**written, "metadata": {**written["metadata"], "labels": {"x": "y"}}})
    assert env.where(big) == "backoff"  # a change of the pod itself may help it


def test_writes_stop_at_the_fence_and_drain_waits_for_those_under_way() -> None:
    entered, leave = threading.Event(), threading.Event()

    class Slow(MemoryAPI):
        def bind(self, pod: Mapping[str, Any], node: str) -> None:
            entered.set()
            leave.wait(5)
            super().bind(pod, node)

    allowed = [True]
    fenced = FencedAPI(Slow(), lambda: allowed[0])
    pod = objects.pod("p")
    writer = threading.Thread(target=fenced.bind, args=(pod, "n1"))
    writer.start()
    assert entered.wait(5)
    allowed[0] = False
    with pytest.raises(APIFailed, match="not leading"):
        fenced.patch_metadata(pod, {"metadata": {"labels": {"a": "b"}}})
    assert not fenced.drain(0.05)  # the bind sent before the fence closed is still under way
    started = time.monotonic()
    threading.Timer(0.1, leave.set).start()
    assert fenced.drain(5) and time.monotonic() - started >= 0.1
    writer.join(5)
    fenced.event(pod, "Normal", "Scheduled", "events pass the fence")


def test_a_point_that_disables_a_plugin_and_lists_it_again_keeps_its_order() -> None:
    """Koordinator's shipped profile, ``bind: {disabled: ["*"], enabled: [Reservation, DefaultBinder]}``,
    binds with Reservation first (kube-scheduler's expandMultiPointPlugins)."""
    registry = plugin_registry()
    registry.register("Custom", Custom)

    def bind_order(bind: dict[str, Any]) -> list[str]:
        conf = parse_configuration(
            {"profiles": [{"plugins": {"bind": bind}}]}, registered=frozenset(registry.names())
        )
        return [e.name for e in app.check(conf, registry)["koord-scheduler"].points["bind"]]

    enabled = [{"name": "Custom"}, {"name": "DefaultBinder"}]
    for disabled in ("*", "DefaultBinder"):
        assert bind_order({"disabled": [{"name": disabled}], "enabled": enabled}) == [
            "Custom",
            "DefaultBinder",
        ]
    # listed again without disabling it: DefaultBinder overrides its multiPoint entry and comes first
    assert bind_order({"enabled": enabled}) == ["DefaultBinder", "Custom"]
