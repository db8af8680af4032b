"""One built-in scheduler plugin over a real cache snapshot, asked both ways: node by node (``filter``,
``score``) and in batch (``filter_nodes``, ``score_nodes``) on the snapshot's arrays and on a plain list of
NodeInfos. Every answer is checked to agree across the three before it is returned, so each plugin test
also checks the vectorised path against the plain one.

A plugin that needs koord-scheduler's handle (informer caches of its own, PreBind patches) gets one with
``handle=True``: a real ``SchedulerHandle`` over in-memory informers holding the same nodes and pods, with
``objects`` (cache name -> objects) put in the caches the plugin watched."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from koord.scheduler.cache.cache import Cache
from koord.scheduler.framework import SKIP, CycleState, NodeSet, Obj, PodInfo, Snapshot, Status
from koord.scheduler.framework.types import NodeInfo
from koord.scheduler.plugins import BUILTIN


class PluginRun:
    def __init__(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        nodes: Iterable[Obj] = (),
        pods: Iterable[Obj] = (),
        handle: bool = False,
        objects: Mapping[str, Iterable[Obj]] | None = None,
    ) -> None:
        nodes, pods = list(nodes), list(pods)
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.handle: Any = None
        if handle:
            from koord.scheduler.app import watches
            from koord.scheduler.core.api import MemoryAPI
            from koord.scheduler.core.handle import SchedulerHandle
            from koord.scheduler.framework.waiting import WaitingPods
            from koordshared.kube.informers import MemoryInformerSet
            from koordshared.testing.clock import FakeClock

            informers = MemoryInformerSet(watches())
            self.handle = SchedulerHandle(self.snapshot, informers, MemoryAPI(), WaitingPods(FakeClock()))
        self.plugin = BUILTIN[name](args, self.handle)
        if self.handle is not None:
            for n in nodes:
                self.handle.informers["nodes"].put(n)
            for p in pods:
                self.handle.informers["pods"].put(p)
            for store, objs in (objects or {}).items():
                for obj in objs:
                    self.handle.informers[store].put(obj)
        for n in nodes:
            self.cache.add_node(n)
        for p in pods:
            self.cache.add_pod(p)
        self.cache.update_snapshot(self.snapshot)

    def _state(self, pod: Obj) -> tuple[CycleState, Status | None]:
        state = CycleState(PodInfo(pod))
        pre = getattr(self.plugin, "pre_filter", None)
        st = pre(state, pod) if pre is not None else None
        return state, st if isinstance(st, Status) or st is None else None

    def _sets(self) -> tuple[list[NodeInfo], NodeSet, NodeSet]:
        infos = self.snapshot.node_infos()
        return infos, NodeSet.of(self.snapshot, infos), NodeSet(None, None, infos)

    def pre_filter(self, pod: Obj) -> Any:
        state = CycleState(PodInfo(pod))
        return self.plugin.pre_filter(state, pod)

    def filter(self, pod: Obj) -> dict[str, Status | None]:
        """node -> the plugin's Filter status (None: passes); a PreFilter SKIP means every node passes."""
        state, pre = self._state(pod)
        infos, arrays, plain = self._sets()
        if pre is SKIP:
            return {ni.name: None for ni in infos}
        one = {ni.name: self.plugin.filter(state, pod, ni) for ni in infos}
        batch = getattr(self.plugin, "filter_nodes", None)
        if batch is not None:
            for nodes in (arrays, plain):
                answer = batch(state, pod, nodes)
                passed = {ni.name for ni, ok in zip(nodes.infos, _passes(answer), strict=True) if ok}
                assert passed == {n for n, st in one.items() if st is None}, (passed, one)
                self._check_why_nodes(state, pod, nodes, one)
        return one

    def _check_why_nodes(
        self, state: CycleState, pod: Obj, nodes: NodeSet, one: dict[str, Status | None]
    ) -> None:
        """A plugin that explains its boolean answer's rejections at once (``why_nodes``) says of each
        rejected node what ``filter`` says."""
        why_nodes = getattr(self.plugin, "why_nodes", None)
        keep = np.asarray([one[ni.name] is not None for ni in nodes.infos], dtype=bool)
        if why_nodes is None or not keep.any():
            return
        rejected = nodes.subset(keep)
        answer = why_nodes(state, pod, rejected)
        got = {ni.name: _words(answer[i]) for i, ni in enumerate(rejected.infos)}
        assert got == {ni.name: _words(one[ni.name]) for ni in rejected.infos}, got

    def reasons(self, pod: Obj) -> dict[str, str]:
        """node -> "" when it passes, else the Filter reasons joined (``unresolvable:`` first when the
        code says so)."""
        out = {}
        for name, st in self.filter(pod).items():
            if st is None:
                out[name] = ""
            else:
                prefix = "unresolvable: " if st.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE" else ""
                out[name] = prefix + ", ".join(st.reasons)
        return out

    def scores(self, pod: Obj, *, normalize: bool = True) -> dict[str, int] | None:
        """node -> score (normalised, as the framework weighs it); ``None`` when PreScore skips."""
        state, _ = self._state(pod)  # the framework runs PreFilter first (a SKIP there skips Filter only)
        infos, arrays, plain = self._sets()
        pre = getattr(self.plugin, "pre_score", None)
        if pre is not None and pre(state, pod, infos) is SKIP:
            return None
        one = np.asarray([int(self.plugin.score(state, pod, ni)) for ni in infos], dtype=np.int64)
        batch = getattr(self.plugin, "score_nodes", None)
        if batch is not None:
            for nodes in (arrays, plain):
                got = np.asarray(batch(state, pod, nodes), dtype=np.int64)
                assert got.tolist() == one.tolist(), (got, one)
        if normalize and hasattr(self.plugin, "normalize_scores"):
            one = np.asarray(self.plugin.normalize_scores(state, pod, one), dtype=np.int64)
        return dict(zip([ni.name for ni in infos], one.tolist(), strict=True))


def _passes(answer: Any) -> list[bool]:
    if isinstance(answer, np.ndarray):
        return [bool(v) for v in answer.tolist()]
    return [st is None or (isinstance(st, Status) and st.is_success) for st in answer]


def _words(st: Status | None) -> tuple[str, tuple[str, ...]] | None:
    return None if st is None else (st.code.name, st.reasons)
