"""LLC occupancy and memory bandwidth of the class-level resctrl groups (koordlet's resctrlCollector).

Layer: ``koordlet.metricsadvisor``. Every ``--resctrl-collector-interval`` (10 s), where the CPU and kernel
offer resctrl monitoring (``koordlet.system.resctrlmon``): for the groups ``LSR``, ``LS`` and ``BE`` (made
by the RdtResctrl plugin) and each L3 cache domain, ``resctrl_resource_llc{qos, cache_id}`` is the bytes of
L3 the group holds and ``resctrl_resource_mb{qos, cache_id, resctrl_mb_type}`` its memory bandwidth in
bytes per second, total and local (``mbm_total_bytes``/``mbm_local_bytes``). koordlet stores the raw MBM
byte counters there, which only grow since the group was made; a rate over the interval is what a
bandwidth figure means, so the first sweep of a group sets a baseline. Where monitoring is unavailable
the reason is logged when it changes (RdtResctrl may mount resctrl later) and nothing is collected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from koordlet.api.metrics import RESCTRL_LLC, RESCTRL_MB
from koordlet.metriccache import SeriesKey
from koordlet.metricsadvisor import framework as fw
from koordlet.system import resctrl, resctrlmon
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

NAME = "ResctrlCollector"
MB_TOTAL, MB_LOCAL = "mbm_total_bytes", "mbm_local_bytes"


@dataclass(frozen=True, slots=True)
class ResctrlCollectorConfig:
    interval: float = 10.0


class ResctrlCollector:
    """``collect()`` appends LLC occupancy and memory bandwidth per class group and cache domain."""

    name = NAME

    def __init__(self, config: ResctrlCollectorConfig, opts: fw.Options) -> None:
        paths = opts.need_paths(self.name)
        cache = opts.cache
        clock = opts.clock
        errors = opts.errors
        self.interval = config.interval
        self._paths = paths
        self._cache = cache
        self._clock = clock
        self._errors = errors
        self._prev: dict[tuple[str, int], tuple[float, resctrlmon.MonData]] = {}
        self._swept = False
        self.unsupported: str | None = None
        """Why monitoring cannot be read now (``None`` while it can)."""

    def collect(self) -> None:
        self._swept = True
        why = resctrlmon.monitoring_unsupported(self._paths)
        if why != self.unsupported and why is not None:
            log.info("resctrl monitoring skipped: %s", why)
        self.unsupported = why
        if why is not None:
            return
        t = self._clock()
        llc: list[tuple[SeriesKey, float]] = []
        mb: list[tuple[SeriesKey, float]] = []
        seen: set[tuple[str, int]] = set()
        for group in resctrl.GROUPS:
            try:
                domains = resctrlmon.read_mon_data(self._paths, group)
            except (InvalidValue, OSError):
                self._errors.error(NAME, fw.ERR_MALFORMED)
                continue
            for cid, data in domains.items():
                labels = (("cache_id", str(cid)), ("qos", group))
                if data.llc_occupancy is not None:
                    llc.append((labels, float(data.llc_occupancy)))
                key = (group, cid)
                seen.add(key)
                prev = self._prev.get(key)
                self._prev[key] = (t, data)
                if prev is None or not t > prev[0]:
                    continue
                bw = resctrlmon.bandwidth(prev[1], data, t - prev[0])
                for mb_type, value in ((MB_TOTAL, bw.total), (MB_LOCAL, bw.local)):
                    if value is not None:
                        mb.append(((*labels, ("resctrl_mb_type", mb_type)), value))
        self._prev = {k: v for k, v in self._prev.items() if k in seen}
        if llc:
            self._cache.append_batch(RESCTRL_LLC, llc, t)
        if mb:
            self._cache.append_batch(RESCTRL_MB, mb, t)

    def has_synced(self) -> bool:
        return self._swept

    def close(self) -> None:
        return None
