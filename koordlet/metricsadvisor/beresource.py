"""BE usage and allocation: ``node_be{be_resource=cpu, be_allocation=usage|real-limit|request}`` (milli).

Layer: ``koordlet.metricsadvisor``. As koordlet's BEResourceCollector:

- usage: the besteffort tier's CPU counter (``cpuacct.usage`` [v1], ``cpu.stat usage_usec`` [v2]) as a
  rate in millicores;
- real-limit: ``min(cpus of the tightest cpuset x 1000, quota x 1000 / period)`` where the cpusets are the
  tier's and its BE containers' (``cpuset.cpus`` [v1] / ``cpuset.cpus.effective`` [v2]) and the quota is
  the tier's (unlimited quota: cpuset only);
- request: the sum of ``kubernetes.io/batch-cpu`` requests of BE pods.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet import api
from koordlet.errors import CgroupGone, InvalidValue, ResourceUnsupported, UnsafePath
from koordlet.metriccache import MetricCache, SeriesKey
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.metricsadvisor.podresource import CONTAINER, targets_of
from koordlet.system import cgstats
from koordlet.system.cgroups import CgroupMode, resource_path
from koordlet.system.cpuset import parse_cpuset
from koordlet.system.host import Host

NAME = "BEResourceCollector"
BE_RESOURCE_CPU = "cpu"
USAGE = "usage"
REAL_LIMIT = "real-limit"
REQUEST = "request"


def be_key(allocation: str) -> tuple[tuple[str, str], ...]:
    """Canonical cache key of ``node_be{be_resource=cpu, be_allocation=<allocation>}``."""
    return (("be_allocation", allocation), ("be_resource", BE_RESOURCE_CPU))


@dataclass(frozen=True, slots=True)
class BEResourceConfig:
    interval: float = 1.0


class BEResourceCollector:
    """``collect()`` appends the three ``node_be`` series."""

    name = NAME

    def __init__(
        self,
        config: BEResourceConfig,
        host: Host,
        cache: MetricCache,
        states: api.StatesReader,
        shared: fw.SharedState,
        clock: fw.Clock,
        errors: fw.ErrorSink,
    ) -> None:
        self.config = config
        self.interval = config.interval
        self._host = host
        self._cache = cache
        self._states = states
        self._shared = shared
        self._clock = clock
        self._errors = errors
        self._fds = FdCache()
        self._usage = fw.DeltaTracker(config.interval)
        self._tier = host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        self._synced = False

    def _read(self, resource: str, cgroup_dir: str) -> bytes | None:
        path = resource_path(self._host.paths, self._host.mode, resource, cgroup_dir, for_read=True)
        return self._fds.read(path)

    def _usage_milli(self, t: float) -> float | None:
        raw = self._read("cpuacct.usage", self._tier)
        if raw is None:
            return None
        text = raw.decode(errors="replace")
        if self._host.mode is CgroupMode.V2:
            usec = cgstats.parse_flat_keyed(text, "cpu.stat").get("usage_usec")
            if usec is None:
                raise InvalidValue("cpu.stat", text[:100], "no usage_usec")
            ns = usec * 1000
        else:
            ns = cgstats.parse_cpuacct_usage(text)
        got = self._usage.update("be", t, (ns,))
        if got is None:
            return None
        return got[1][0] / (got[0] * 1e9) * 1000.0

    def _cpuset_milli(self, pods: list[api.PodInfo], paths_seen: list[str]) -> float | None:
        """Cores of the tightest cpuset among the tier and its BE containers, x 1000."""
        dirs = [self._tier]
        targets, _ = targets_of(self._host, pods, collect_containers=True)
        dirs += [t.cgroup_dir for t in targets if t.kind == CONTAINER]
        best: int | None = None
        for cgroup_dir in dirs:
            path = resource_path(self._host.paths, self._host.mode, "cpuset.cpus", cgroup_dir, for_read=True)
            paths_seen.append(str(path))
            raw = self._fds.read(path)
            if raw is None:
                continue  # a container that just ended: the others still bound the tier
            cpus = parse_cpuset(raw.decode(errors="replace"))
            # An empty effective cpuset appears for a moment on v2 while a child is created; skip it.
            if cpus and (best is None or len(cpus) < best):
                best = len(cpus)
        return None if best is None else best * 1000.0

    def _quota_milli(self) -> float | None:
        quota_raw = self._host.read("cpu.cfs_quota_us", self._tier)
        period_raw = self._host.read("cpu.cfs_period_us", self._tier)
        if quota_raw is None or period_raw is None:
            return None
        quota, period = int(quota_raw), int(period_raw)
        if quota < 0 or period <= 0:
            return None
        return quota * 1000.0 / period

    def collect(self) -> None:
        t = self._clock()
        pods = [p for p in self._states.pods() if p.is_best_effort]
        samples: list[tuple[SeriesKey, float]] = [
            (be_key(REQUEST), float(sum(p.batch_cpu_request_milli for p in pods)))
        ]
        try:
            usage = self._usage_milli(t)
            if usage is not None:
                samples.append((be_key(USAGE), usage))
        except (InvalidValue, OSError):
            self._errors.error(NAME, fw.ERR_MALFORMED)
        paths_seen: list[str] = [
            str(resource_path(self._host.paths, self._host.mode, "cpuacct.usage", self._tier, for_read=True))
        ]
        try:
            limit = self._real_limit(pods, paths_seen)
            if limit is not None:
                samples.append((be_key(REAL_LIMIT), limit))
        except (InvalidValue, OSError, ValueError):
            self._errors.error(NAME, fw.ERR_MALFORMED)
        except UnsafePath:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
        self._fds.retain(paths_seen)
        fw.report_rejections(self._usage, self._errors, NAME)
        self._cache.append_batch(api.NODE_BE, samples, t)
        self._synced |= len(samples) > 1 or self._usage_absent()

    def _real_limit(self, pods: list[api.PodInfo], paths_seen: list[str]) -> float | None:
        limits: list[float] = []
        try:
            cpuset = self._cpuset_milli(pods, paths_seen)
        except ResourceUnsupported:
            cpuset = None
        if cpuset is None:
            count = self._shared.get(fw.CPU_COUNT)
            cpuset = count.value * 1000.0 if count is not None else None
        if cpuset is not None:
            limits.append(cpuset)
        try:
            quota = self._quota_milli()
        except (CgroupGone, ResourceUnsupported):
            quota = None
        if quota is not None:
            limits.append(quota)
        return min(limits) if limits else None

    def _usage_absent(self) -> bool:
        """No besteffort tier at all (no BE pods ever ran): nothing more will come, do not block sync."""
        path = resource_path(self._host.paths, self._host.mode, "cpuacct.usage", self._tier, for_read=True)
        return not path.parent.is_dir()

    def has_synced(self) -> bool:
        return self._synced

    def close(self) -> None:
        self._fds.close()
