"""``BECPUSuppress``: keep best-effort pods inside what LS leaves free (Koordinator's ``cpu_suppress.go``).

Budget (millicores), every ``cpu-suppress-interval-seconds`` (1 s)::

    system  = max(node - Σ all pods - Σ host apps, 0, node reservation)
    non_be  = Σ non-BE pods + Σ non-BE host apps + system
    be      = capacity * cpuSuppressThresholdPercent/100 - non_be

Policy ``cpuset`` (the default) confines the BE tier to ``ceil(be/1000)`` CPUs, ``cfsQuota`` writes the
tier's quota; the fast path (~40 ms samples) shrinks BE at once on a real rise, growth waits for the
periodic tick. Only the BE tier and what lies below it is written. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from koordlet import api
from qosplugins import _shared
from qosplugins.cpusuppress import budget as _budget
from qosplugins.cpusuppress import cpuset as _cpuset
from qosplugins.cpusuppress import fastrise as _fastrise

POLICY_CPUSET = _budget.POLICY_CPUSET
POLICY_CFS_QUOTA = _budget.POLICY_CFS_QUOTA
BE_CPU_MANAGER = "BECPUManager"
KUBELET_STATIC = "static"
INTERVAL = api.Flag("cpu-suppress-interval-seconds", float, 1.0, "BE CPU suppress interval in seconds")
FAST_RISE_FRACTION = 0.01
"""The least non-BE rise (of capacity) the fast path acts on; above it the learnt noise band decides."""


class BECPUSuppress(api.QOSPluginBase):
    """Suppress BE CPU by cpuset or CFS quota from the LS usage of the node."""

    name = "BECPUSuppress"
    feature = api.FeatureSpec(default=True, stage=api.Stage.BETA)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(INTERVAL)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._decision: _budget.Decision | None = None
        self._probe = _budget.DemandProbe()
        self._rise = _fastrise.RiseDetector()
        self._restored = False
        self._fast_wanted = False
        self._mattered_at = -_budget.ARM_HOLD_SECONDS  # fast path held armed after, while suppressing
        self._cpuset_written: tuple[str, str | None, frozenset[str]] | None = None
        self._warned = ""
        self._status: api.JSONObject = {}
        self._labels = {"node": ctx.node_name}
        self._cores = ctx.registry.gauge(
            "koordlet_be_suppress_cpu_cores", "BE CPU allowed by suppression", ["node", "type"]
        )
        self._ls_used = ctx.registry.gauge(
            "koordlet_be_suppress_ls_used_cpu_cores", "non-BE CPU used at suppression", ["node"]
        )
        self._be_used = ctx.registry.gauge(
            "koordlet_be_suppress_be_used_cpu_cores", "BE CPU used at suppression", ["node"]
        )
        # koordlet reports its share pools with the node topology: LS share pool = CPUs not reserved, not
        # exclusive to system QoS, not bound to LSE/LSR pods; the BE share pool adds the LSR-bound ones.
        self._share_pool = ctx.registry.gauge(
            "koordlet_cpuset_share_pool_cpu_cores", "CPUs of the LS share pool", ["node"]
        )
        self._be_share_pool = ctx.registry.gauge(
            "koordlet_cpuset_be_share_pool_cpu_cores", "CPUs of the BE share pool", ["node"]
        )

    def run(self, stop: threading.Event) -> None:
        self.ctx.subscribe(api.EVENT_NODE_SAMPLE, self.on_node_sample)
        self.ctx.every(self.ctx.option(INTERVAL), self.reconcile)

    def shutdown(self) -> None:
        with self._lock:
            self.ctx.want_fast_samples(False)
            self._fast_wanted = False
            self._restore("agent stopping")
            self._decision = None
        self.ctx.executor.release(self.name)

    # -- periodic path -------------------------------------------------------------------------------

    def reconcile(self) -> None:
        with self._lock:
            want, now = self._reconcile_locked(), self.ctx.clock()
            self._mattered_at = now if want else self._mattered_at
            want = want or (self._decision is not None and now - self._mattered_at < _budget.ARM_HOLD_SECONDS)
            if want != self._fast_wanted:
                self.ctx.want_fast_samples(want)
                self._fast_wanted = want

    def _reconcile_locked(self) -> bool:
        """One periodic decision; whether the fast path can matter now (``_budget.fast_path_matters``)."""
        slo = self.ctx.states.node_slo().resource_used_threshold_with_be
        if self.ctx.agent.feature_gates.get(BE_CPU_MANAGER, False):
            self._decision = None
            self._recover_for_be_cpu_manager()
            return False
        if not slo.enable:
            self._status = {"active": False, "why": "resourceUsedThresholdWithBE disabled in the NodeSLO"}
            self._decision = None
            self._probe.reset()
            if not self._restored:
                self._restore("resourceUsedThresholdWithBE disabled")
            return False
        resource = "cpu.cfs_quota_us" if slo.cpu_suppress_policy == POLICY_CFS_QUOTA else "cpuset.cpus"
        if not self.ctx.host.supports(resource):
            self._warn_once(
                f"{resource} is not available on this host: {slo.cpu_suppress_policy} policy paused"
            )
            return False
        be_dir = self.ctx.host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        pods = self.ctx.states.pods()
        intruder = _budget.non_be_pod_in(be_dir, pods)
        if intruder is not None:
            self._warn_once(
                f"pod {intruder.namespace}/{intruder.name} ({intruder.qos or 'no QoS'}) is in the BE tier "
                "and would be confined with it: BE suppression restored and paused"
            )
            self._decision = None
            if not self._restored:
                self._restore("non-BE pod in the BE tier")
            return False
        usage = _budget.measure_usage(self.ctx, pods)
        if usage is None:
            self.ctx.logger.debug("BECPUSuppress: no node CPU sample yet")
            return False
        self._warned = ""
        non_be = max(usage.non_be_milli, self._rise.level(self.ctx.clock()) or 0.0)
        budget = _budget.be_budget_milli(
            usage.capacity_milli, slo.cpu_suppress_threshold_percent, slo.cpu_suppress_min_percent, non_be
        )
        pools = _cpuset.cpu_pools(self.ctx.host.cpu_topology(), self.ctx.states.node(), pods)
        self._set(self._share_pool, float(len(pools.ls)))
        self._set(self._be_share_pool, float(len(pools.usable)))
        decision = _budget.Decision(
            at=self.ctx.clock(),
            policy=slo.cpu_suppress_policy,
            be_dir=be_dir,
            capacity_milli=usage.capacity_milli,
            threshold_percent=slo.cpu_suppress_threshold_percent,
            min_percent=slo.cpu_suppress_min_percent,
            non_be_milli=non_be,
            non_be_floor_milli=usage.non_be_floor_milli,
            pools=pools,
        )
        self._set(self._ls_used, (usage.pod_non_be_milli + usage.host_app_non_be_milli) / 1000.0)
        self._set(self._be_used, usage.be_pods_milli / 1000.0)
        self._status = _budget.explain(
            decision, budget, "periodic", self.ctx.wall_clock(), usage, self._status, self._rise.band
        )
        self._apply(decision, budget, shrink_only=False, usage=usage)
        if decision.policy == POLICY_CFS_QUOTA:
            self._recover_cpuset(be_dir, pools, only_if_changed=True)
        else:
            self._recover_quota(be_dir)
        self._decision = decision
        self._restored = False
        return _budget.fast_path_matters(usage, slo.cpu_suppress_threshold_percent)

    # -- fast path -----------------------------------------------------------------------------------

    def on_node_sample(self) -> None:
        """``EVENT_NODE_SAMPLE`` handler: shrink BE at once when non-BE usage rises (see module doc)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            decision = self._decision
            now = self.ctx.clock()
            raw = _budget.fast_non_be(self.ctx)
            if raw is None:
                return
            if decision is None:  # nothing to shrink yet; the samples still teach the noise band
                self._rise.observe(now, raw, None, 0.0)
                return
            # The noise band and the level learn the samples as measured: the per-pod floor is a second
            # old after LS falls, and it held the level (so the periodic budget) up a tick too long.
            least = FAST_RISE_FRACTION * decision.capacity_milli
            rose = self._rise.observe(now, raw, decision.non_be_milli, least)
            non_be = max(raw, decision.non_be_floor_milli)
            if decision.policy == POLICY_CPUSET:
                # A cpuset step is a whole CPU and comes back one CPU a tick: a rise must hold for two
                # samples (one-window bursts of other work pinned BE at 2-3 CPUs of 4).
                sustained = self._rise.sustained(now, non_be, rose)
                rose, non_be = sustained is not None, non_be if sustained is None else sustained
            if not rose and (held := self._rise.held()) is not None:  # a smaller rise that holds
                rose, non_be = True, max(held, decision.non_be_floor_milli)
            if not rose or not _shared.threshold_enabled(self.ctx):
                return
            budget = _budget.be_budget_milli(
                decision.capacity_milli, decision.threshold_percent, decision.min_percent, non_be
            )
            # The decision carries the fast non-BE, so the write's audit reason names what the budget
            # subtracted (the stale periodic figure made "budget -202m, non-BE 648m" unexplainable).
            fresh = dataclasses.replace(decision, at=now, non_be_milli=non_be)
            now_wall = self.ctx.wall_clock()
            self._status = _budget.explain(
                fresh, budget, "fast", now_wall, None, self._status, self._rise.band
            )
            self._apply(fresh, budget, shrink_only=True)
            self._decision = fresh
        finally:
            self._lock.release()

    # -- writers -------------------------------------------------------------------------------------

    def _apply(
        self, decision: _budget.Decision, budget: float, shrink_only: bool, usage: _budget.Usage | None = None
    ) -> None:
        if decision.policy == POLICY_CFS_QUOTA:
            self._apply_quota(decision, budget, shrink_only, usage)
        else:
            self._apply_cpuset(decision, budget, shrink_only)

    def _apply_cpuset(self, decision: _budget.Decision, budget: float, shrink_only: bool) -> None:
        online = frozenset(c.cpu for c in decision.pools.online)
        node = self.ctx.states.node()
        static = node is not None and node.kubelet_cpu_manager_policy == KUBELET_STATIC
        old = self._current_be_cpus(decision.be_dir, static)
        old_count = len(old & online) if old is not None else None
        target = _cpuset.choose_be_cpus(decision.pools, budget, old_count)
        if not target:
            return
        if shrink_only and (old_count is None or len(target) >= old_count):
            return
        reason = _budget.write_reason(decision, budget, shrink_only)
        changed = old is None or old != frozenset(target)
        outer = api.format_cpuset(decision.pools.usable_ids) if static else None
        self._set(self._cores, float(len(target)), type=POLICY_CPUSET)
        # Written again when the value or the BE cgroups the pods name change (walking the tier every tick
        # was most of an idle node's suppress cost); the executor's force update re-applies it meanwhile.
        key = (api.format_cpuset(target), outer, _shared.be_cgroup_dirs(self.ctx.states.pods()))
        if changed or key != self._cpuset_written:
            self._write_cpuset(decision.be_dir, key[0], reason, changed, outer=outer)
            self._cpuset_written = key  # after the write: every other writer forgets it

    def _current_be_cpus(self, be_dir: str, static: bool) -> frozenset[int] | None:
        """The BE cpuset in force: the tier's, or under kubelet ``static`` (tier kept wide) a container's."""
        if static:
            levels = _shared.dirs_by_depth(be_dir, self.ctx.host.list_cgroups(be_dir, 2))
            for container in levels[2]:
                cpus = _shared.read_cpuset(self.ctx, container)
                if cpus is not None:
                    return cpus
        return _shared.read_cpuset(self.ctx, be_dir)

    def _apply_quota(
        self, decision: _budget.Decision, budget: float, shrink_only: bool, usage: _budget.Usage | None
    ) -> None:
        cur = _shared.parse_quota(_shared.read_value(self.ctx, "cpu.cfs_quota_us", decision.be_dir))
        if cur is None:
            return
        new = _budget.quota_target(budget, cur, decision.capacity_milli)
        reason = _budget.write_reason(decision, budget, shrink_only)
        if usage is not None:
            ceiling = self._probe.limit(
                self.ctx.clock(),
                cur,
                usage.be_pods_milli,
                usage.pod_non_be_milli + usage.host_app_non_be_milli,
                decision.capacity_milli,
            )
            if ceiling is not None and (new if new is not None else cur) > ceiling:
                new, reason = ceiling, f"{reason}; LS demand probe"
        if new is None or new == cur or (shrink_only and cur != _shared.UNLIMITED and new >= cur):
            return
        self._write_quota(decision.be_dir, new, reason)
        self._set(self._cores, new / _shared.CFS_PERIOD_US, type=POLICY_CFS_QUOTA)

    def _write_cpuset(
        self,
        be_dir: str,
        value: str,
        reason: str,
        changed: bool = True,
        *,
        outer: str | None = None,
        skip_pods: frozenset[str] = frozenset(),
    ) -> None:
        """``value`` on the tier, its pods and their containers; ``outer`` (kubelet static) instead on
        the tier and pods; containers of the pod dirs in ``skip_pods`` are left alone."""
        self._cpuset_written = None  # a recover or restore writes something else
        levels = _shared.dirs_by_depth(be_dir, self.ctx.host.list_cgroups(be_dir, 2))
        if not levels[0]:
            return
        if skip_pods:
            levels[2] = [d for d in levels[2] if d.rpartition("/")[0] not in skip_pods]
        self.ctx.logger.log(
            logging.INFO if changed else logging.DEBUG,
            "BECPUSuppress: BE cpuset -> %s (%s)%s",
            value,
            reason,
            " [dry-run]" if self.ctx.dry_run else "",
        )
        values = [outer or value, outer or value, value]
        updates = [
            [api.CgroupUpdate("cpuset.cpus", d, v, owner=self.name, reason=reason) for d in level]
            for level, v in zip(levels, values, strict=True)
        ]
        _shared.report_refused(self.ctx, self.ctx.executor.leveled_update(updates))

    def _write_quota(self, be_dir: str, quota: int, reason: str) -> None:
        dry = " [dry-run]" if self.ctx.dry_run else ""
        self.ctx.logger.info("BECPUSuppress: BE cfs quota -> %d (%s)%s", quota, reason, dry)
        update = api.CgroupUpdate(
            "cpu.cfs_quota_us", be_dir, str(quota), owner=self.name, reason=reason, cacheable=False
        )
        _shared.report_refused(self.ctx, [self.ctx.executor.update(update)])

    def _recover_quota(self, be_dir: str) -> None:
        cur = _shared.parse_quota(_shared.read_value(self.ctx, "cpu.cfs_quota_us", be_dir))
        if cur is not None and cur != _shared.UNLIMITED:
            self._write_quota(be_dir, _shared.UNLIMITED, "recover: cpuset policy in use")

    def _recover_cpuset(self, be_dir: str, pools: _cpuset.CPUPools, only_if_changed: bool) -> None:
        if only_if_changed and _shared.read_cpuset(self.ctx, be_dir) == pools.usable_ids:
            return
        self._write_cpuset(be_dir, api.format_cpuset(pools.usable_ids), "recover: all usable CPUs")

    def _recover_for_be_cpu_manager(self) -> None:
        """``BECPUManager``: no suppression; quota unlimited and every usable CPU back on the tier, its
        pods and the containers of pods without a scheduler placement (``resource-status``)."""
        be_dir = self.ctx.host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        self._recover_quota(be_dir)
        pods = self.ctx.states.pods()
        pools = _cpuset.cpu_pools(self.ctx.host.cpu_topology(), self.ctx.states.node(), pods)
        if not pools.usable:
            return
        placed = frozenset(
            p.cgroup_dir.rstrip("/") for p in pods if p.cgroup_dir and _cpuset.pod_has_resource_status(p)
        )
        changed = _shared.read_cpuset(self.ctx, be_dir) != pools.usable_ids
        value = api.format_cpuset(pools.usable_ids)
        self._write_cpuset(be_dir, value, "recover: BECPUManager", changed, skip_pods=placed)
        self._restored = True

    def _restore(self, why: str) -> None:
        """Quota back to unlimited and cpusets to every usable CPU (once per disable)."""
        be_dir = self.ctx.host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        self.ctx.logger.info("BECPUSuppress: restoring BE CPU (%s)", why)
        if _shared.read_value(self.ctx, "cpu.cfs_quota_us", be_dir) is not None:
            self._write_quota(be_dir, _shared.UNLIMITED, f"recover: {why}")
        pools = _cpuset.cpu_pools(
            self.ctx.host.cpu_topology(), self.ctx.states.node(), self.ctx.states.pods()
        )
        if pools.usable:
            self._recover_cpuset(be_dir, pools, only_if_changed=False)
        self._restored = True

    def status(self) -> api.JSONObject:
        """The last budget and what it was computed from (``api.StatusReporter``, for ``koordlet top``)."""
        active = self._status.get("active")
        return {**self._status, "fastSamplesWanted": self._fast_wanted} if active else self._status

    def _set(self, gauge: api.GaugeVec, value: float, **extra: str) -> None:
        gauge.labels(**self._labels, **extra).set(value)

    def _warn_once(self, message: str) -> None:
        self._status = {"active": False, "why": message}
        if message != self._warned:
            self.ctx.logger.warning("BECPUSuppress: %s", message)
            self._warned = message
