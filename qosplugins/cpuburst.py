"""``CPUBurst``: let LS containers borrow CPU over their limit (Koordinator's
``pkg/koordlet/qosmanager/plugins/cpuburst/cpu_burst.go``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import enum
import json
import random
import threading
from dataclasses import dataclass, replace

from koordlet import api
from qosplugins import _shared

ANNOTATION = "koordinator.sh/cpuBurst"
BURST_POLICIES = ("cpuBurstOnly", "auto")
QUOTA_POLICIES = ("cfsQuotaBurstOnly", "auto")
KNOWN_POLICIES = ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")
SKIPPED_QOS = (api.QOSClass.LSR, api.QOSClass.LSE, api.QOSClass.BE)


class NodeState(enum.StrEnum):
    OVERLOAD = "overload"
    COOLING = "cooling"
    IDLE = "idle"
    UNKNOWN = "unknown"


class Op(enum.StrEnum):
    UP = "scaleUp"
    DOWN = "scaleDown"
    REMAIN = "remain"
    RESET = "reset"


def pod_config(node_cfg: api.CPUBurstStrategy, pod: api.PodInfo) -> api.CPUBurstStrategy | None:
    """The node strategy overlaid with the pod annotation; ``None`` when the result is invalid."""
    cfg = node_cfg
    text = pod.annotations.get(ANNOTATION)
    if text:
        try:
            raw = json.loads(text)
        except ValueError:
            return None
        if not isinstance(raw, dict):
            return None
        fields = {
            "policy": "policy",
            "cpuBurstPercent": "cpu_burst_percent",
            "cfsQuotaBurstPercent": "cfs_quota_burst_percent",
            "cfsQuotaBurstPeriodSeconds": "cfs_quota_burst_period_seconds",
        }
        changes: dict[str, object] = {}
        for key, attr in fields.items():
            if key in raw:
                value = raw[key]
                wanted = str if attr == "policy" else int
                if not isinstance(value, wanted) or isinstance(value, bool):
                    return None
                changes[attr] = value
        cfg = replace(cfg, **changes)  # type: ignore[arg-type]
    if cfg.policy not in KNOWN_POLICIES or cfg.cpu_burst_percent <= 0 or cfg.cfs_quota_burst_percent <= 0:
        return None
    return cfg


@dataclass(slots=True)
class TokenBucket:
    """Percent-seconds a container may spend above its limit (``cfsQuotaBurstPeriodSeconds``)."""

    capacity: float
    tokens: float
    last: float
    period: float

    def update(self, now: float, usage_percent: float) -> float:
        dt = max(now - self.last, 0.0)
        self.last = now
        if usage_percent >= 100:
            self.tokens -= (usage_percent - 100) * dt
        elif usage_percent < 60:
            self.tokens += (100 - usage_percent) * dt
        self.tokens = min(max(self.tokens, -self.capacity), self.capacity)
        return self.tokens


class CPUBurst(api.QOSPluginBase):
    """CFS burst and quota scaling for LS containers with CPU limits."""

    name = "CPUBurst"
    feature = api.FeatureSpec(default=True, stage=api.Stage.BETA)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._rng = random.Random()
        self._buckets: dict[str, TokenBucket] = {}
        self._scaled: dict[str, tuple[str, int]] = {}
        """container dir -> (pod dir, base quota) for every quota moved off its base."""
        self._burst_applied: dict[str, tuple[api.PodInfo, api.CPUBurstStrategy]] = {}
        """pod uid -> the pod and config whose burst values the executor accepted whole (see
        :meth:`_apply_burst`)."""
        labels = ["node", "pod_namespace", "pod_name", "container_id", "container_name"]
        self._burst_gauge = ctx.registry.gauge(
            "koordlet_container_scaled_cfs_burst_us", "cfs burst set by CPUBurst", labels
        )
        self._quota_gauge = ctx.registry.gauge(
            "koordlet_container_scaled_cfs_quota_us", "cfs quota set by CPUBurst", labels
        )

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def shutdown(self) -> None:
        for container_dir, (pod_dir, base) in list(self._scaled.items()):
            self._move_quota(pod_dir, container_dir, base, Op.RESET)
        self._scaled.clear()
        self.ctx.executor.release(self.name)

    def reconcile(self) -> None:
        ctx = self.ctx
        strategy = ctx.states.node_slo().cpu_burst_strategy
        now = ctx.clock()
        # The node state asks the metric cache about every BE pod: only a quota to scale needs it.
        state: NodeState | None = None
        burst_supported = ctx.host.supports("cpu.cfs_burst_us")
        capacity_quota = _shared.capacity_milli(ctx) * _shared.CFS_PERIOD_US // 1000
        seen: set[str] = set()
        applied, self._burst_applied = self._burst_applied, {}
        for pod in ctx.states.pods():
            if pod.qos_raw in SKIPPED_QOS or not pod.is_active or not pod.cgroup_dir:
                continue
            cfg = pod_config(strategy, pod)
            if cfg is None:
                ctx.logger.warning(
                    "CPUBurst: invalid cpuBurst config for %s/%s, skipped", pod.namespace, pod.name
                )
                continue
            if burst_supported:
                self._apply_burst(pod, cfg, applied.get(pod.uid))
            for c in pod.containers:
                if not c.cgroup_dir or not c.running or c.cpu_limit_milli <= 0:
                    continue
                seen.add(c.cgroup_dir)
                op = Op.RESET
                if cfg.policy in QUOTA_POLICIES:
                    state = self.node_state(strategy) if state is None else state
                    op = self._quota_op(c, cfg, state, now)
                base = c.cpu_limit_milli * _shared.CFS_PERIOD_US // 1000
                ceil = (
                    base * cfg.cfs_quota_burst_percent // 100 if cfg.cfs_quota_burst_percent > 100 else base
                )
                target = self._move_quota(
                    pod.cgroup_dir, c.cgroup_dir, base, op, max(min(ceil, capacity_quota), base)
                )
                if target is not None:
                    self._quota_gauge.labels(
                        ctx.node_name, pod.namespace, pod.name, c.container_id, c.name
                    ).set(target)
        for gone in set(self._scaled) - seen:
            del self._scaled[gone]
        interval = ctx.agent.reconcile_interval
        for key in [k for k, b in self._buckets.items() if now - b.last > 2 * max(b.period, interval)]:
            del self._buckets[key]

    def node_state(self, strategy: api.CPUBurstStrategy) -> NodeState:
        """Share-pool load: CPU not bound to LSE/LSR, used by everyone but LSE/LSR/BE pods."""
        ctx = self.ctx
        window = min(5 * ctx.agent.reconcile_interval, 10.0)
        node = ctx.metrics.query(api.NODE_CPU_USAGE, window=window, agg="avg")
        if node is None or node.count <= 0:
            return NodeState.UNKNOWN
        total = _shared.capacity_milli(ctx) / 1000.0
        used = node.value
        for pod in ctx.states.pods():
            if pod.qos_raw in (api.QOSClass.LSE, api.QOSClass.LSR):
                total -= pod.cpu_request_milli / 1000.0
            if pod.qos_raw in SKIPPED_QOS:
                pod_used = ctx.metrics.query(
                    api.POD_CPU_USAGE, window=window, agg="avg", labels={"pod_uid": pod.uid}
                )
                if pod_used is not None and pod_used.count > 0:
                    used -= pod_used.value
        ratio = used / total if total > 0 else 1.0
        threshold = strategy.share_pool_threshold_percent / 100.0
        if ratio >= threshold:
            return NodeState.OVERLOAD
        if ratio >= 0.9 * threshold:
            return NodeState.COOLING
        return NodeState.IDLE

    def _apply_burst(
        self,
        pod: api.PodInfo,
        cfg: api.CPUBurstStrategy,
        last: tuple[api.PodInfo, api.CPUBurstStrategy] | None,
    ) -> None:
        """The pod's and its containers' ``cpu.cfs_burst_us``. The values follow from the pod and its
        config alone, so a pod whose burst the executor took whole (written or equal, none gone or
        refused) with the same pod and config is not sent again: the executor's force update repairs
        them meanwhile (re-sending every pod's unchanged values each second was most of
        this plugin's idle cost). A changed pod (a container started, a new limit or annotation) or
        strategy, or a write that did not take, sends them all on the next round."""
        if last is not None and (last[0] is pod or last[0] == pod) and last[1] == cfg:
            self._burst_applied[pod.uid] = last
            return
        total = 0
        updates: list[api.CgroupUpdate] = []
        for c in pod.containers:
            if not c.cgroup_dir:
                continue
            value = 0
            if cfg.policy in BURST_POLICIES and c.cpu_limit_milli > 0:
                base = c.cpu_limit_milli * _shared.CFS_PERIOD_US // 1000
                value = min(
                    c.cpu_limit_milli * cfg.cpu_burst_percent * _shared.CFS_PERIOD_US // 100_000, base
                )
            total += value
            updates.append(api.CgroupUpdate("cpu.cfs_burst_us", c.cgroup_dir, str(value), owner=self.name))
            self._burst_gauge.labels(self.ctx.node_name, pod.namespace, pod.name, c.container_id, c.name).set(
                value
            )
        updates.append(api.CgroupUpdate("cpu.cfs_burst_us", pod.cgroup_dir, str(total), owner=self.name))
        # One batch per pod, no reads here: the executor reads a file only when its cache has no fresh
        # entry for the value, and skips an equal one (reading every file every tick cost more than the
        # rest of the plugin at 1000 pods).
        results = self.ctx.executor.update_batch(updates)
        _shared.report_refused(self.ctx, results)
        if all(r.ok and r.skipped in ("", "unchanged") for r in results):
            self._burst_applied[pod.uid] = (pod, cfg)

    def _quota_op(self, c: api.ContainerInfo, cfg: api.CPUBurstStrategy, state: NodeState, now: float) -> Op:
        op = Op.REMAIN
        usage = _shared.last_value(self.ctx, api.CONTAINER_CPU_USAGE, {"container_id": c.container_id})
        bucket = None
        if cfg.cfs_quota_burst_period_seconds >= 0:
            capacity = float(cfg.cfs_quota_burst_period_seconds * max(cfg.cfs_quota_burst_percent - 100, 0))
            bucket = self._buckets.get(c.cgroup_dir)
            if bucket is None or bucket.capacity != capacity:
                # A random start spreads containers so they do not all run out of tokens together.
                bucket = TokenBucket(
                    capacity,
                    self._rng.random() * 0.5 * capacity,
                    now,
                    float(cfg.cfs_quota_burst_period_seconds),
                )
                self._buckets[c.cgroup_dir] = bucket
        if bucket is not None and usage is not None:
            bucket.update(now, usage * 1000 * 100 / c.cpu_limit_milli)
        if bucket is not None and bucket.tokens <= 0:
            op = Op.DOWN
        else:
            throttled = _shared.last_value(
                self.ctx, api.CONTAINER_CPU_THROTTLED, {"container_id": c.container_id}
            )
            if throttled is not None and throttled > 0:
                op = Op.UP
        if state is NodeState.OVERLOAD and op in (Op.UP, Op.REMAIN):
            op = Op.DOWN
        elif state in (NodeState.COOLING, NodeState.UNKNOWN) and op is Op.UP:
            op = Op.REMAIN
        return op

    def _move_quota(
        self, pod_dir: str, container_dir: str, base: int, op: Op, ceil: int | None = None
    ) -> int | None:
        """Scale one container quota (and its pod's by the same delta); returns the new container quota."""
        cur = _shared.parse_quota(_shared.read_value(self.ctx, "cpu.cfs_quota_us", container_dir))
        if cur is None or cur == _shared.UNLIMITED or op is Op.REMAIN:
            return cur
        if op is Op.RESET and cur <= base:
            # Only a quota above the limit can be ours (possibly from an earlier run); one at or below
            # it is kubelet's (a custom CFS period, say) and resetting it would fight kubelet.
            self._scaled.pop(container_dir, None)
            return cur
        top = ceil if ceil is not None else base
        if op is Op.UP:
            target = int(cur * 1.2)
        elif op is Op.DOWN:
            target = int(cur * 0.8)
        else:
            target = base
        target = max(min(target, top), base)
        if target == base:
            self._scaled.pop(container_dir, None)
        else:
            self._scaled[container_dir] = (pod_dir, base)
        if target == cur:
            return cur
        delta = target - cur
        levels: list[list[api.CgroupUpdate]] = [[], [], []]
        pod_cur = _shared.parse_quota(_shared.read_value(self.ctx, "cpu.cfs_quota_us", pod_dir))
        if (
            pod_cur is not None
            and pod_cur != _shared.UNLIMITED
            and pod_cur + delta >= _shared.MIN_BE_QUOTA_US
        ):
            levels[1].append(self._update(pod_dir, pod_cur + delta, op))
        levels[2].append(self._update(container_dir, target, op))
        self.ctx.logger.info(
            "CPUBurst: %s cfs quota %s %d -> %d%s",
            op,
            container_dir,
            cur,
            target,
            " [dry-run]" if self.ctx.dry_run else "",
        )
        _shared.report_refused(self.ctx, self.ctx.executor.leveled_update(levels))
        return target

    def _update(self, cgroup_dir: str, quota: int, op: Op) -> api.CgroupUpdate:
        return api.CgroupUpdate("cpu.cfs_quota_us", cgroup_dir, str(quota), owner=self.name, reason=str(op))
