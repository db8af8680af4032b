"""The scheduler plugin author's harness: a profile's plugins in the real framework over in-memory caches
and a fake clock, so a test adds nodes, pods and NodeMetrics and asks what the framework says of a pod.

    kit = SchedulerHarness({"plugins": {"multiPoint": {"enabled": [{"name": "AvoidLabel"}]}},
                            "pluginConfig": [{"name": "AvoidLabel", "args": {"label": "x"}}]},
                           plugins={"AvoidLabel": AvoidLabel})
    kit.nodes.put(node("a", labels={"x": ""}))
    kit.nodes.put(node("b"))
    assert kit.filter(pod("p")) == {"a": "node(s) had label x", "b": ""}
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.extender.handle import ExtenderHandle, extender_watches
from koord.scheduler.framework import Obj, PluginFactory, verdicts
from koord.scheduler.framework.extension import plugin_controllers
from koord.scheduler.framework.profile import parse_profile
from koord.scheduler.framework.runtime import Framework
from koord.scheduler.plugins import plugin_registry
from koordshared.apis.core.pod import pod_key, pod_uid, with_condition
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import format_time
from koordshared.kube.informers import MemoryInformerSet
from koordshared.testing.clock import FakeClock


def run_score(fw: Framework, state: Any, pod: Obj, nodes: Sequence[Any]) -> dict[str, int]:
    """PreScore, Score and NormalizeScore over ``nodes``: node -> the extender's combined 0..10, as
    ``/prioritize`` answers."""
    ns, combined = verdicts.node_scores(fw, state, pod, nodes)
    return dict(zip(ns.names, combined, strict=True))


class SchedulerHarness:
    """``profile`` (default: the default profile) with ``plugins`` registered beside the built-ins."""

    def __init__(
        self,
        profile: Mapping[str, Any] | None = None,
        *,
        plugins: Mapping[str, PluginFactory] | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock = clock or FakeClock()
        self.informers = MemoryInformerSet(extender_watches())
        self.nodes = self.informers["nodes"]
        self.pods = self.informers["pods"]
        self.node_metrics = self.informers["nodemetrics"]
        self.handle = ExtenderHandle(self.nodes, self.pods, self.node_metrics, clock=self.clock.wall)
        registry = plugin_registry(entry_points=lambda: [])
        for name, factory in (plugins or {}).items():
            registry.register(name, factory)
        self.framework = Framework(parse_profile({"profiles": [dict(profile or {})]}), registry, self.handle)

    def plugin(self, name: str) -> Any:
        """The built plugin called ``name``."""
        return self.framework.instances[name]

    def filter(self, pod: Obj, nodes: Sequence[str] | None = None) -> dict[str, str]:
        """PreFilter then Filter over ``nodes`` (default: every cached node): node -> "" when it passes,
        else the reason of the first plugin that rejects it."""
        with self.handle.cycle():
            infos = self._infos(nodes)
            out = verdicts.run_filter(self.framework, verdicts.new_state(pod), pod, infos)
        return {ni.name: out.failed.get(ni.name) or out.unresolvable.get(ni.name) or "" for ni in infos}

    def scores(self, pod: Obj, nodes: Sequence[str] | None = None) -> dict[str, int]:
        """The combined score of every node of ``nodes`` that passes the filter (0..10, as ``/prioritize``
        answers)."""
        state = verdicts.new_state(pod)
        with self.handle.cycle():
            infos = self._infos(nodes)
            passed = set(verdicts.run_filter(self.framework, state, pod, infos).passed)
            if not passed:
                return {}
            return run_score(self.framework, state, pod, [ni for ni in infos if ni.name in passed])

    def explain(self, pod: Obj, node: str) -> dict[str, Any]:
        """Each plugin's verdict and normalised score for ``node`` (the framework's explanation)."""
        with self.handle.cycle():
            return verdicts.explain(self.framework, pod, self._infos(None), [node])[node]

    def _infos(self, nodes: Sequence[str] | None) -> list[Any]:
        """The snapshot's NodeInfos (call inside ``handle.cycle()``)."""
        if nodes is None:
            return list(self.handle.node_infos())
        return [info for n in nodes if (info := self.handle.node_info(n)) is not None]


def apply_merge_patch(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with the RFC 7386 merge ``patch`` applied (``null`` deletes), as the API server does."""
    out = dict(obj)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = apply_merge_patch(out[key], value)
        else:
            out[key] = value
    return out


class MemoryScheduler:
    """The whole koord-scheduler in memory: the real queue, cache, profiles and cycles over in-memory
    caches, with a recording API whose bindings (and plugins' object patches) come back through the caches
    as the API server's watch would, and the plugins' controllers run by hand (:meth:`reconcile`). For
    end-to-end tests of plugins (Permit waits, PreBind patches, gangs...) without a process: ``add_node``,
    ``add_pod``, ``run()`` (schedule until the queue has nothing ready), then ``bound()``. Backing-off
    pods wait for the fake clock unless ``pop_from_backoff`` (the recording API never removes a pod it
    deleted: early retries would repeat an attempt).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        plugins: Mapping[str, PluginFactory] | None = None,
        clock: FakeClock | None = None,
        seed: int = 0,
        parallelism: int = 1,
        pop_from_backoff: bool = False,
    ) -> None:
        from prometheus_client import CollectorRegistry

        from koord.scheduler.app import build_frameworks, watches
        from koord.scheduler.cache.cache import Cache
        from koord.scheduler.config import parse_configuration
        from koord.scheduler.core.api import MemoryAPI
        from koord.scheduler.core.eventhandlers import EventHandlers
        from koord.scheduler.core.handle import SchedulerHandle
        from koord.scheduler.core.metrics import SchedulerMetrics
        from koord.scheduler.core.scheduler import Scheduler, SchedulingOptions
        from koord.scheduler.framework.extension import FailureHooks
        from koord.scheduler.framework.snapshot import Snapshot
        from koord.scheduler.framework.waiting import WaitingPods

        self.clock = clock or FakeClock()
        self.informers = MemoryInformerSet(watches())
        self.pods = self.informers["pods"]
        self.nodes = self.informers["nodes"]
        self.api = MemoryAPI(self._bound)
        self.api.patch_object = self._patch_object  # type: ignore[method-assign]
        self.api.delete_object = self._delete_object  # type: ignore[method-assign]
        self.api.patch_metadata = self._patch_metadata  # type: ignore[method-assign]
        registry = plugin_registry(entry_points=lambda: [])
        for name, factory in (plugins or {}).items():
            registry.register(name, factory)
        self.configuration = parse_configuration(
            config or {}, "config", registered=frozenset(registry.names())
        )
        self.snapshot, self.cache, self.waiting = Snapshot(), Cache(), WaitingPods(self.clock)
        hooks = FailureHooks()
        self.handle = SchedulerHandle(
            self.snapshot, self.informers, self.api, self.waiting, clock=self.clock.wall, hooks=hooks
        )
        self.registry = CollectorRegistry()
        self.metrics = SchedulerMetrics(self.registry)
        frameworks = build_frameworks(self.configuration, registry, self.handle, self.metrics)
        conf = self.configuration
        self.scheduler = Scheduler(
            frameworks,
            self.api,
            self.metrics,
            cache=self.cache,
            snapshot=self.snapshot,
            waiting=self.waiting,
            pods=self.pods,
            options=SchedulingOptions(
                percentage_of_nodes_to_score=conf.percentage_of_nodes_to_score,
                pod_initial_backoff_seconds=conf.pod_initial_backoff_seconds,
                pod_max_backoff_seconds=conf.pod_max_backoff_seconds,
                parallelism=parallelism,
                pop_from_backoff=pop_from_backoff,
            ),
            hooks=hooks,
            seed=seed,
            clock=self.clock,
        )
        EventHandlers(self.scheduler).attach(self.pods, self.nodes)
        self.controllers = plugin_controllers(fw.instances for fw in frameworks.values())

    def _bound(self, pod: Obj, node: str) -> None:
        """What kube-apiserver's binding writes: the node's name and ``PodScheduled`` True."""
        current = self.pods.get(pod_key(pod))
        base = current if current is not None else pod
        status = dict(base.get("status") or {})
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastTransitionTime": format_time(self.clock()),
        }
        status["conditions"] = with_condition(status.get("conditions") or (), scheduled)
        self.add_pod({**base, "spec": {**(base.get("spec") or {}), "nodeName": node}, "status": status})

    def _patch_object(
        self,
        resource: groups.Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> None:
        """Record the patch, and hand the patched object to the caches holding it (the watch's event)."""
        type(self.api).patch_object(self.api, resource, namespace, name, patch, subresource=subresource)
        key = f"{namespace}/{name}" if namespace else name
        if resource == groups.PODS and not subresource:
            current = self.pods.get(key)
            if current is not None:
                self.add_pod(apply_merge_patch(current, patch))
            return
        for store_name in self.handle.watched(resource):
            store = self.informers[store_name]
            current = store.get(key)
            if current is not None:
                store.put(apply_merge_patch(current, patch))

    def _patch_metadata(self, pod: Obj, patch: Mapping[str, Any]) -> None:
        """Record the pod's PreBind PATCH and apply it to the cached pod (the watch's event)."""
        type(self.api).patch_metadata(self.api, pod, patch)
        current = self.pods.get(pod_key(pod))
        if current is not None and pod_uid(current) == pod_uid(pod):
            self.add_pod(apply_merge_patch(current, patch))

    def _delete_object(self, resource: groups.Resource, namespace: str, name: str) -> None:
        type(self.api).delete_object(self.api, resource, namespace, name)
        for store_name in self.handle.watched(resource):
            self.informers[store_name].remove(f"{namespace}/{name}" if namespace else name)

    def _pod_stores(self) -> list[Any]:
        """The pod caches: the scheduler's (non-terminated pods) and those plugins watch (by label...)."""
        return [self.informers[name] for name in self.handle.watched(groups.PODS)]

    def add_node(self, node: Obj) -> None:
        self.nodes.put(node)

    def add_pod(self, pod: Obj) -> None:
        """Create or update a pod; one in a terminal phase leaves the scheduler's cache, as with the API
        server's field selector, and stays in the caches plugins watch."""
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            self.pods.remove(pod_key(pod))
        else:
            self.pods.put(pod)
        for store in self._pod_stores():
            store.put(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.pods.remove(f"{namespace}/{name}")
        for store in self._pod_stores():
            store.remove(f"{namespace}/{name}")

    def run(self, limit: int = 10_000) -> int:
        """Schedule until no pod is ready now, then reconcile the controllers (and again while that makes
        pods ready); the number of cycles run. Bindings finish before it returns."""
        cycles = 0
        while cycles < limit:
            while cycles < limit and self.scheduler.schedule_next(timeout=0):
                cycles += 1
                self.settle()
            self.settle()
            self.reconcile()
            if not self.scheduler.schedule_next(timeout=0):
                break
            cycles += 1
            self.settle()
        return cycles

    def reconcile(self, rounds: int = 20) -> None:
        """Sync the plugins' controllers until a round writes nothing (their writes come back through the
        caches and may give them more to do)."""
        for _ in range(rounds):
            before = self._writes()
            for c in self.controllers:
                c.sync()
            if self._writes() == before:
                return

    def _writes(self) -> tuple[int, int, int, int]:
        api = self.api
        return (
            len(api.object_patches),
            len(api.events),
            sum(map(len, api.statuses.values())),
            len(api.deleted_objects),
        )

    def settle(self) -> None:
        """Wait for every binding submitted so far."""
        self.scheduler.drain()

    def bound(self) -> dict[str, str]:
        """``namespace/name`` -> node of every binding made."""
        return dict(self.api.bindings)

    def events(self, reason: str = "") -> list[tuple[str, str, str, str]]:
        return [e for e in self.api.events if not reason or e[2] == reason]

    def stop(self) -> None:
        self.scheduler.stop()
