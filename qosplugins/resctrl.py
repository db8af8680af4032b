"""``RdtResctrl``: last-level cache ways and memory bandwidth per QoS class (Koordinator's
``pkg/koordlet/qosmanager/plugins/resctrl/resctrl_reconcile.go``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from koordlet import api
from qosplugins import _qosconfig as cfg
from qosplugins import _shared
from qosplugins._refusals import Refusals

SECTION = "resctrlQOS"
RECHECK_SECONDS = 60.0
POD_ANNOTATION = "node.koordinator.sh/resctrl"
GROUPS: Mapping[str, str] = {"LSR": cfg.LSR_CLASS, "LS": cfg.LS_CLASS, "BE": cfg.BE_CLASS}
_GROUP_OF: Mapping[api.QOSClass, str] = {
    api.QOSClass.LSE: "LSR",
    api.QOSClass.LSR: "LSR",
    api.QOSClass.LS: "LS",
    api.QOSClass.BE: "BE",
}


def parse_tids(text: str | None) -> list[int]:
    """A ``tasks``/``cgroup.threads`` listing; anything but TIDs is skipped."""
    return [int(t) for t in (text or "").split() if t.isdecimal()]


def group_update(owner: str, group: str, qos: api.ResctrlQOS) -> api.ResctrlUpdate:
    l3 = (qos.cat_range_start_percent, qos.cat_range_end_percent)
    return api.ResctrlUpdate(group, owner, l3_percent=l3, mb_percent=qos.mba_percent, reason=SECTION)


class RdtResctrl(api.QOSPluginBase):
    """Class-level resctrl groups, their schemata and their threads."""

    name = "RdtResctrl"
    feature = api.FeatureSpec(default=True, stage=api.Stage.BETA)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._made: set[str] = set()
        self._present: set[str] = set()
        self._skipped_why: str | None = None
        self._checked = float("-inf")
        self._refusals = Refusals(ctx)

    def run(self, stop: threading.Event) -> None:
        # Why a host cannot do resctrl (the CPU's flags, a kernel without the file system) holds until it
        # reboots: then nothing is scheduled at all (a tick a second was an idle agent's wake-up).
        with self._lock:
            if self._unsupported() is not None:
                return
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def _unsupported(self) -> str | None:
        """Why resctrl cannot be used, asked of the host at most once a minute (CPU flags do not change)."""
        now = self.ctx.clock()
        if now - self._checked >= RECHECK_SECONDS or (self._skipped_why is None and not self._present):
            self._checked = now
            why = self.ctx.host.resctrl_unsupported()
            if why is not None and why != self._skipped_why:
                self.ctx.logger.info("resctrl QoS skipped: %s", why)
            self._skipped_why = why
        return self._skipped_why

    def reconcile(self) -> None:
        with self._lock:
            if self._unsupported() is not None:
                return
            slo = self.ctx.states.node_slo()
            for group, key in GROUPS.items():
                if group not in self._present:
                    self._ensure(group)
                if group in self._present:
                    qos = cfg.class_qos(slo, key).resctrl_qos
                    self._check(self.ctx.executor.update_resctrl(group_update(self.name, group, qos)))
            for group, tids in self.tasks(slo).items():
                if group in self._present and tids:
                    self._check(
                        self.ctx.executor.move_resctrl_tasks(group, tids, owner=self.name, reason=SECTION)
                    )

    def _ensure(self, group: str) -> None:
        res = self.ctx.executor.ensure_resctrl_group(group, owner=self.name, reason=SECTION)
        if res.written:
            self._made.add(group)
        if res.ok and res.skipped not in ("unsupported", "dry-run"):
            self._present.add(group)
        else:
            self._present.discard(group)
            self._check(res)

    def _check(self, res: api.UpdateResult) -> None:
        if res.skipped == "gone" and res.update.resource in ("schemata", "tasks"):
            self._present.discard(res.update.cgroup_dir)  # removed behind our back: made again next pass
        self._refusals.report([res])

    def tasks(self, slo: api.NodeSLO) -> dict[str, list[int]]:
        """The threads each group should hold: every cgroup of each enabled pod, sandbox included."""
        out: dict[str, list[int]] = {}
        for pod in self.ctx.states.pods():
            group = _GROUP_OF.get(pod.qos)
            if group is None or not pod.is_active or not pod.cgroup_dir or POD_ANNOTATION in pod.annotations:
                continue
            if not cfg.class_qos(slo, GROUPS[group]).resctrl_qos.enable:
                continue
            tids = out.setdefault(group, [])
            for d in self.ctx.host.list_cgroups(pod.cgroup_dir, 1):
                tids += parse_tids(_shared.read_value(self.ctx, "tasks", d))
        return out

    def shutdown(self) -> None:
        with self._lock:
            for group in sorted(self._present):
                if group in self._made:
                    self._check(self.ctx.executor.remove_resctrl_group(group, owner=self.name, reason="stop"))
                else:
                    whole = api.ResctrlUpdate(group, self.name, (0, 100), 100, reason="stop")
                    self._check(self.ctx.executor.update_resctrl(whole))
            self._made.clear()
            self._present.clear()
            self.ctx.executor.release(self.name)
