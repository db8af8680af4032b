"""Host applications of the NodeSLO (``spec.hostApplications``): CPU and memory of non-pod workloads.

Layer: ``koordlet.metricsadvisor``. An application is measured through its cgroup when the NodeSLO gives a
``cgroupPath`` or when koordlet's default dir exists (``host-latency-sensitive/<name>``, or
``host-best-effort/<name>`` for BE), exactly as pods are (``cpuacct.usage``/``cpu.stat``, ``memory.stat``
working set). Otherwise its processes are found by name (``psutil``) and their CPU times and RSS summed;
a process is keyed by (pid, create time) so PID reuse is not mistaken for a counter going backwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import psutil

from koordlet import api
from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.system import cgstats
from koordlet.system.cgroups import CgroupMode, check_cgroup_dir, resource_path
from koordlet.system.host import Host
from koordshared.runtime.errors import InvalidValue

NAME = "HostApplicationCollector"
_BE_QOS = frozenset({api.QOSClass.BE})
_BASES = {
    "": None,
    "CgroupRoot": None,
    "Kubepods": api.KubeQOSClass.GUARANTEED,
    "KubepodsBurstable": api.KubeQOSClass.BURSTABLE,
    "KubepodsBesteffort": api.KubeQOSClass.BESTEFFORT,
}


@dataclass(frozen=True, slots=True)
class HostAppConfig:
    interval: float = 1.0


@dataclass(frozen=True, slots=True)
class ProcSample:
    """One process: identity, cumulative CPU time (seconds, user+system) and resident memory."""

    pid: int
    create_time: float
    name: str
    cpu_seconds: float
    rss_bytes: int


class ProcessSource(Protocol):
    """Finds processes by name (``psutil`` in production, a fake in tests)."""

    def by_name(self, names: frozenset[str]) -> Sequence[ProcSample]: ...


class PsutilProcesses:
    """``psutil.process_iter`` with only the attributes needed (62-118 us per process, A4).

    psutil reads the agent's own procfs, not ``HostPaths.proc_root``: in a DaemonSet this needs hostPID.
    """

    def by_name(self, names: frozenset[str]) -> Sequence[ProcSample]:
        out: list[ProcSample] = []
        for proc in psutil.process_iter(["name", "cpu_times", "memory_info", "create_time"]):
            info = proc.info
            if info.get("name") not in names or info.get("cpu_times") is None:
                continue  # other process, or one that exited / was denied during the scan
            times = info["cpu_times"]
            mem = info.get("memory_info")
            out.append(
                ProcSample(
                    pid=proc.pid,
                    create_time=float(info.get("create_time") or 0.0),
                    name=str(info["name"]),
                    cpu_seconds=float(times.user + times.system),
                    rss_bytes=int(mem.rss) if mem is not None else 0,
                )
            )
        return out


def app_cgroup_dir(host: Host, app: api.HostApplication) -> tuple[str, bool]:
    """``(cgroup dir, given)``: the NodeSLO's ``cgroupPath`` when set (``given``), else koordlet's default."""
    if app.cgroup_base or app.cgroup_parent_dir or app.cgroup_relative_path:
        if app.cgroup_base not in _BASES:
            raise UnsafePath(f"unknown cgroupPath base {app.cgroup_base!r}")
        qos = _BASES[app.cgroup_base]
        base = host.qos_cgroup_dir(qos) if qos is not None else host.paths.cgroup_parent.strip("/")
        parts = [p.strip("/") for p in (base, app.cgroup_parent_dir, app.cgroup_relative_path)]
        return check_cgroup_dir("/".join(p for p in parts if p)), True
    parent = "host-best-effort" if app.qos in _BE_QOS else "host-latency-sensitive"
    return check_cgroup_dir(f"{parent}/{app.name}"), False


class HostApplicationCollector:
    """``collect()`` appends ``host_application_cpu_usage`` and ``_memory_usage`` per application."""

    name = NAME

    def __init__(
        self, config: HostAppConfig, opts: fw.Options, *, processes: ProcessSource | None = None
    ) -> None:
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
        self._processes = processes if processes is not None else PsutilProcesses()
        self._fds = FdCache()
        self._cgroup_cpu = fw.DeltaTracker(config.interval)
        self._proc_cpu = fw.DeltaTracker(config.interval)
        self._sweeps = 0

    def collect(self) -> None:
        t = self._clock()
        apps = self._states.node_slo().host_applications
        cpu: list[tuple[str, float]] = []
        mem: list[tuple[str, float]] = []
        by_name: list[api.HostApplication] = []
        seen: list[str] = []
        for app in apps:
            try:
                cgroup_dir, given = app_cgroup_dir(self._host, app)
                cpu_path = resource_path(
                    self._host.paths, self._host.mode, "cpuacct.usage", cgroup_dir, for_read=True
                )
                mem_path = resource_path(self._host.paths, self._host.mode, "memory.stat", cgroup_dir)
            except (UnsafePath, ResourceUnsupported):
                self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
                continue
            if not given and not cpu_path.parent.is_dir():
                by_name.append(app)
                continue
            seen += [str(cpu_path), str(mem_path)]
            self._from_cgroup(app.name, t, str(cpu_path), str(mem_path), cpu, mem)
        if by_name:
            self._from_processes(by_name, t, cpu, mem)
        self._fds.retain(seen)
        self._cgroup_cpu.retain(a.name for a in apps)
        fw.report_rejections(self._cgroup_cpu, self._errors, NAME)
        fw.report_rejections(self._proc_cpu, self._errors, NAME)
        if cpu:
            self._cache.append_batch(api.HOST_APP_CPU_USAGE, cpu, t)
            self._shared.set(fw.HOST_APPS_CPU, t, sum(v for _, v in cpu))
        if mem:
            self._cache.append_batch(api.HOST_APP_MEMORY_USAGE, mem, t)
            self._shared.set(fw.HOST_APPS_MEMORY, t, sum(v for _, v in mem))
        self._sweeps += 1

    def _from_cgroup(
        self,
        name: str,
        t: float,
        cpu_path: str,
        mem_path: str,
        cpu: list[tuple[str, float]],
        mem: list[tuple[str, float]],
    ) -> None:
        try:
            cpu_raw = self._fds.read(cpu_path)
            mem_raw = self._fds.read(mem_path)
        except OSError:
            self._errors.error(NAME, fw.ERR_READ)
            return
        if cpu_raw is None or mem_raw is None:
            self._errors.error(NAME, fw.ERR_GONE)
            self._cgroup_cpu.forget(name)
            return
        try:
            ns = cgstats.parse_cpu_usage_ns(
                cpu_raw.decode(errors="replace"), v2=self._host.mode is CgroupMode.V2
            )
            got = self._cgroup_cpu.update(name, t, (ns,))
            if got is not None:
                cpu.append((name, got[1][0] / (got[0] * 1e9)))
        except InvalidValue:
            self._errors.error(NAME, fw.ERR_MALFORMED)
        try:
            mem.append((name, float(cgstats.parse_memory_stat(mem_raw.decode(errors="replace")).usage)))
        except InvalidValue:
            self._errors.error(NAME, fw.ERR_MALFORMED)

    def _from_processes(
        self,
        apps: Iterable[api.HostApplication],
        t: float,
        cpu: list[tuple[str, float]],
        mem: list[tuple[str, float]],
    ) -> None:
        wanted = {a.name for a in apps}
        procs = self._processes.by_name(frozenset(wanted))
        rates: dict[str, float] = {}
        rss: dict[str, int] = {}
        live: list[tuple[int, float]] = []
        for p in procs:
            key = (p.pid, p.create_time)
            live.append(key)
            rss[p.name] = rss.get(p.name, 0) + p.rss_bytes
            got = self._proc_cpu.update(key, t, (round(p.cpu_seconds * 1e9),))
            if got is not None:
                rates[p.name] = rates.get(p.name, 0.0) + got[1][0] / (got[0] * 1e9)
        self._proc_cpu.retain(live)
        for name in sorted(wanted):
            if name in rates:
                cpu.append((name, rates[name]))
            if name in rss:
                mem.append((name, float(rss[name])))

    def has_synced(self) -> bool:
        return self._sweeps >= 2

    def close(self) -> None:
        self._fds.close()
