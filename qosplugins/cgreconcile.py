"""``CgroupReconcile``: memory QoS on pod, container and kube QoS tier cgroups (Koordinator's
``pkg/koordlet/qosmanager/plugins/cgreconcile/cgroup_reconcile.go``).

Every ``reconcile-interval-seconds`` (the agent's flag, 1 s), for active pods: the class's ``memoryQOS``
(``lsrClass`` for LSE/LSR, ``lsClass``, ``beClass``, ``systemClass``) with the pod's
``koordinator.sh/memoryQOS`` annotation (the arithmetic is :mod:`qosplugins._memqos`'s) gives
``memory.min``/``memory.low`` on pods and containers, ``memory.high`` on containers, their sums on the
tiers, and the Anolis watermark/priority knobs. Written level by level (tiers, pods, containers) through
the executor, which orders growth parents first and shrink children first. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import os
import threading

from koordlet import api
from qosplugins import _memqos as mq
from qosplugins import _qosconfig as cfg
from qosplugins import _shared
from qosplugins._originals import Originals, Want
from qosplugins._refusals import Refusals

SOFT_LIMIT = "memory.soft_limit_in_bytes"
TIER, POD, CONTAINER = 0, 1, 2
TIERS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
_PROBED = ("memory.min", "memory.low", "memory.high", *mq.KNOBS, "memory.oom.group", SOFT_LIMIT)


class CgroupReconcile(api.QOSPluginBase):
    """Memory protection and throttling per class and pod."""

    name = "CgroupReconcile"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._supported: frozenset[str] | None = None
        self._originals = Originals(self._read_original)
        self._refusals = Refusals(ctx)
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def supported(self) -> frozenset[str]:
        if self._supported is None:
            self._supported = frozenset(r for r in _PROBED if self.ctx.host.supports(r))
            self.ctx.logger.info(
                "memory QoS files on this kernel: %s", ", ".join(sorted(self._supported)) or "none"
            )
        return self._supported

    def _read_original(self, u: api.CgroupUpdate) -> str | None:
        return _shared.read_value(self.ctx, u.resource, u.cgroup_dir)

    def reconcile(self) -> None:
        with self._lock:
            levels = self._originals.plan(self.wants())
            self._refusals.report(self.ctx.executor.leveled_update(levels))

    def wants(self) -> list[Want]:
        """Every value memory QoS asks for now, with its level."""
        ok = self.supported()
        if not ok:
            return []
        slo = self.ctx.states.node_slo()
        node = self.ctx.states.node()
        allocatable = 0 if node is None else node.memory_allocatable_bytes or node.memory_capacity_bytes
        out: list[Want] = []
        sums: dict[api.KubeQOSClass, tuple[int, int]] = {}
        for pod in self.ctx.states.pods():
            key = cfg.class_key(pod.qos)
            if not pod.is_active or not pod.cgroup_dir or key is None:
                continue
            c = mq.pod_config(pod, cfg.class_qos(slo, key).memory_qos)
            if c is None:
                continue
            lo_min, low = mq.protection(mq.pod_request(pod), c)
            s_min, s_low = sums.get(pod.kube_qos, (0, 0))
            sums[pod.kube_qos] = (s_min + lo_min, s_low + low)
            out += self._values(ok, pod.cgroup_dir, POD, pod, c, lo_min, low, None)
            for ctr in pod.containers:
                if not ctr.cgroup_dir:
                    continue
                req, limit = mq.container_limits(pod, ctr)
                c_min, c_low = mq.protection(req, c)
                high = mq.memory_high(req, limit, allocatable, c, self._page)
                out += self._values(ok, ctr.cgroup_dir, CONTAINER, pod, c, c_min, c_low, high)
        out += self._tiers(ok, slo, sums)
        return out

    def _values(
        self,
        ok: frozenset[str],
        d: str,
        level: int,
        pod: api.PodInfo,
        c: api.MemoryQOS,
        lo_min: int,
        low: int,
        high: int | None,
    ) -> list[Want]:
        values: dict[str, str] = {"memory.min": str(lo_min), "memory.low": str(low)}
        if level == CONTAINER:
            values["memory.high"] = mq.UNLIMITED if high is None else str(high)
        if "memory.low" not in ok:
            # v1 upstream: the soft limit stands for memory.low (see the module docstring)
            values[SOFT_LIMIT] = str(low) if low > 0 or pod.is_best_effort else mq.UNLIMITED
        for resource, attr in mq.KNOBS.items():
            values[resource] = str(getattr(c, attr))
        if c.oom_kill_group == 1:
            values["memory.oom.group"] = "1"
        return [Want(self._update(r, d, v), level) for r, v in values.items() if r in ok]

    def _tiers(
        self, ok: frozenset[str], slo: api.NodeSLO, sums: dict[api.KubeQOSClass, tuple[int, int]]
    ) -> list[Want]:
        out: list[Want] = []
        everything = tuple(map(sum, zip(*sums.values(), strict=False))) if sums else ()
        for tier in TIERS:
            # the Guaranteed tier is kubepods itself, parent of the other two: it protects all of them
            total = everything if tier is api.KubeQOSClass.GUARANTEED else sums.get(tier)
            d = self.ctx.host.qos_cgroup_dir(tier)
            if total:
                for resource, value in zip(("memory.min", "memory.low"), total, strict=True):
                    if resource in ok:
                        out.append(Want(self._update(resource, d, str(value)), TIER))
            c = cfg.class_qos(slo, cfg.tier_class_key(tier)).memory_qos
            if c.enable:
                for resource in mq.TIER_KNOBS:
                    if resource in ok:
                        knob = str(getattr(c, mq.KNOBS[resource]))
                        out.append(Want(self._update(resource, d, knob), TIER))
        return out

    def _update(self, resource: str, cgroup_dir: str, value: str) -> api.CgroupUpdate:
        return api.CgroupUpdate(resource, cgroup_dir, value, owner=self.name, reason="memoryQOS")

    def shutdown(self) -> None:
        with self._lock:
            levels = self._originals.restore_all()
            self._refusals.report(self.ctx.executor.leveled_update(levels))
            self.ctx.executor.release(self.name)
