"""BE usage and allocation: ``node_be{be_resource=cpu, be_allocation=usage|real-limit|request}`` (milli).

Layer: ``koordlet.metricsadvisor``. As koordlet's BEResourceCollector:

- usage: the besteffort tier's CPU counter (``cpuacct.usage`` [v1], ``cpu.stat usage_usec`` [v2]) as a
  rate in millicores;
- real-limit: ``min(cpus of the tightest cpuset x 1000, quota x 1000 / period)`` where the cpusets are the
  tier's and its BE containers' (``cpuset.cpus`` [v1] / ``cpuset.cpus.effective`` [v2]) and the quota is
  the tier's (unlimited quota: cpuset only);
- request: the sum of ``kubernetes.io/batch-cpu`` requests of BE pods. Details: ``docs/modules.md``.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass

from koordlet import api
from koordlet.api.errors import CgroupGone, ResourceUnsupported, UnsafePath
from koordlet.metriccache import SeriesKey
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.metricsadvisor.targets import CONTAINER, targets_of
from koordlet.system import cgstats, native
from koordlet.system.batchread import GONE_STATUSES, BatchReader, FileKind
from koordlet.system.cgroups import CgroupMode, resource_path
from koordshared.runtime.errors import InvalidValue

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

    def __init__(self, config: BEResourceConfig, opts: fw.Options) -> None:
        host = opts.need_host(self.name)
        cache = opts.cache
        states = opts.need_states(self.name)
        shared = opts.shared
        clock = opts.clock
        errors = opts.errors
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
        self._tier_usage_path = str(
            resource_path(host.paths, host.mode, "cpuacct.usage", self._tier, for_read=True)
        )
        self._last_pods: tuple[api.PodInfo, ...] = ()
        self._cpusets: BatchReader | None = None
        self._request = 0
        """Sum of BE batch-cpu requests of ``_last_pods`` (a thousand pods cost ~2 ms a tick to re-add)."""
        self._synced = False
        self._closed = False

    def _usage_milli(self, t: float) -> float | None:
        raw = self._fds.read(self._tier_usage_path)
        if raw is None:
            return None
        ns = cgstats.parse_cpu_usage_ns(raw.decode(errors="replace"), v2=self._host.mode is CgroupMode.V2)
        got = self._usage.update("be", t, (ns,))
        if got is None:
            return None
        return got[1][0] / (got[0] * 1e9) * 1000.0

    def _refresh(self, all_pods: Sequence[api.PodInfo]) -> None:
        """BE request sum and the cpuset reader, recomputed only when the pods change (the informer hands
        out the same immutable PodInfo objects until then)."""
        last = self._last_pods
        if (
            len(all_pods) == len(last)
            and all(map(operator.is_, all_pods, last))
            and self._cpusets is not None
        ):
            return
        self._last_pods = tuple(all_pods)
        pods = [p for p in all_pods if p.is_best_effort]
        self._request = sum(p.batch_cpu_request_milli for p in pods)
        targets, _ = targets_of(self._host, pods, collect_containers=True)
        dirs = [self._tier, *(t.cgroup_dir for t in targets if t.kind == CONTAINER)]
        paths: list[str] = []
        for cgroup_dir in dirs:
            try:
                paths.append(
                    str(
                        resource_path(
                            self._host.paths, self._host.mode, "cpuset.cpus", cgroup_dir, for_read=True
                        )
                    )
                )
            except UnsafePath:
                self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
        reader = self._cpusets
        if reader is None:
            self._cpusets = native.open_batch_reader(
                paths, [FileKind.CPU_LIST] * len(paths), [()] * len(paths)
            )
            return
        # A BE pod coming or going changes a file or two: the reader follows in place (order does not
        # matter for a minimum), the other files keep their descriptors.
        wanted = set(paths)
        have = list(reader.layout.paths)
        for path in [p for p in have if p not in wanted]:
            i = have.index(path)
            reader.swap(i, len(have) - 1)
            have[i], have[-1] = have[-1], have[i]
            have.pop()
            reader.truncate(len(have))
        held = set(have)
        new = [p for p in dict.fromkeys(paths) if p not in held]
        if new:
            reader.extend(new, [FileKind.CPU_LIST] * len(new), [()] * len(new))

    def _cpuset_milli(self) -> float | None:
        """Cores of the tightest cpuset among the tier and its BE containers, x 1000."""
        if self._cpusets is None:
            return None
        res = self._cpusets.read()
        best: int | None = None
        for st, size in zip(res.status, res.values, strict=True):
            if st:
                if st in GONE_STATUSES:
                    continue  # a container that just ended: the others still bound the tier
                raise OSError(-st, os.strerror(-st))  # unparsable (EINVAL/ERANGE) or unreadable
            # An empty effective cpuset appears for a moment on v2 while a child is created; skip it.
            if size and (best is None or size < best):
                best = size
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
        if self._closed:
            return  # a last tick racing shutdown: the cpuset reader is closed
        t = self._clock()
        all_pods = self._states.pods()
        try:
            self._refresh(all_pods)
        except ResourceUnsupported:
            pass  # no cpuset files on this host: the CPU count bounds the tier
        samples: list[tuple[SeriesKey, float]] = [(be_key(REQUEST), float(self._request))]
        try:
            usage = self._usage_milli(t)
            if usage is not None:
                samples.append((be_key(USAGE), usage))
        except (InvalidValue, OSError):
            self._errors.error(NAME, fw.ERR_MALFORMED)
        try:
            limit = self._real_limit()
            if limit is not None:
                samples.append((be_key(REAL_LIMIT), limit))
        except (InvalidValue, OSError, ValueError):
            self._errors.error(NAME, fw.ERR_MALFORMED)
        except UnsafePath:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
        fw.report_rejections(self._usage, self._errors, NAME)
        self._cache.append_batch(api.NODE_BE, samples, t)
        self._synced |= len(samples) > 1 or self._usage_absent()

    def _real_limit(self) -> float | None:
        limits: list[float] = []
        cpuset = self._cpuset_milli()
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
        return not os.path.isdir(os.path.dirname(self._tier_usage_path))

    def has_synced(self) -> bool:
        return self._synced

    def close(self) -> None:
        self._closed = True
        self._fds.close()
        if self._cpusets is not None:
            self._cpusets.close()
