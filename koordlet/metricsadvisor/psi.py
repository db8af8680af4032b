"""Pressure stall information: node (``/proc/pressure/*``) and, where the kernel offers it, pods/containers.

Layer: ``koordlet.metricsadvisor``. Node PSI goes to ``node_psi{psi_resource, psi_precision, psi_degree}``
(10/60/300 s averages, percent). Pod and container PSI follow koordlet's PerformanceCollector: avg10 only,
``pod_psi``/``container_psi`` plus ``pod_psi_cpu_full_supported``. Cgroup pressure files exist on every v2
kernel with PSI, but on v1 only on kernels that patch them into ``cpuacct`` (Anolis): elsewhere the pod
part is skipped without error, as is everything on a kernel booted with ``psi=0``.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.api.metrics import CONTAINER_PSI, NODE_PSI, POD_PSI, POD_PSI_CPU_FULL_SUPPORTED
from koordlet.metriccache import SeriesKey
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.fdcache import FdCache
from koordlet.metricsadvisor.targets import POD, targets_of
from koordlet.system import procfs
from koordlet.system.cgroups import CgroupMode, resource_path
from koordshared.runtime.errors import InvalidValue

NAME = "PSICollector"
# (file stem in /proc/pressure and cgroup resource, koordlet's psi_resource label)
_RESOURCES = (("cpu", "cpu"), ("memory", "mem"), ("io", "io"))


@dataclass(frozen=True, slots=True)
class PSIConfig:
    interval: float = 10.0
    collect_pods: bool = True


def _pairs(resource: str, precision: str, degree: str, **extra: str) -> SeriesKey:
    labels = {"psi_resource": resource, "psi_precision": precision, "psi_degree": degree, **extra}
    return tuple(sorted(labels.items()))


class PSICollector:
    """``collect()`` appends node PSI and, when supported, pod and container PSI."""

    name = NAME

    def __init__(self, config: PSIConfig, opts: fw.Options) -> None:
        host = opts.need_host(self.name)
        cache = opts.cache
        states = opts.need_states(self.name)
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.interval = config.interval
        self._host = host
        self._cache = cache
        self._states = states
        self._clock = clock
        self._errors = errors
        self._fds = FdCache()
        self._synced = False
        self._pods_supported: bool | None = None

    def pods_supported(self) -> bool:
        """v2 has cgroup pressure files wherever the kernel has PSI (an absent file is skipped quietly);
        v1 has them only on kernels that patch them into ``cpuacct`` (probed at its root)."""
        if self._pods_supported is None:
            self._pods_supported = self._host.mode is CgroupMode.V2 or self._host.supports("cpu.pressure")
        return self._pods_supported

    def _parse(self, path: object) -> procfs.PSI | None:
        try:
            raw = self._fds.read(str(path))
        except OSError:
            self._errors.error(NAME, fw.ERR_READ)
            return None
        if raw is None:
            return None
        try:
            return procfs.parse_psi(raw.decode(errors="replace"))
        except InvalidValue:
            self._errors.error(NAME, fw.ERR_MALFORMED)
            return None

    def collect(self) -> None:
        t = self._clock()
        node: list[tuple[SeriesKey, float]] = []
        for stem, label in _RESOURCES:
            psi = self._parse(self._host.paths.proc("pressure", stem))
            if psi is None:
                continue
            for degree, line in (("some", psi.some), ("full", psi.full)):
                if line is None:
                    continue
                for precision, value in (("10", line.avg10), ("60", line.avg60), ("300", line.avg300)):
                    node.append((_pairs(label, precision, degree), value))
        if node:
            self._cache.append_batch(NODE_PSI, node, t)
        seen: list[str] = [str(self._host.paths.proc("pressure", stem)) for stem, _ in _RESOURCES]
        if self.config.collect_pods and self.pods_supported():
            self._collect_pods(t, seen)
        self._fds.retain(seen)
        self._synced = True

    def _collect_pods(self, t: float, seen: list[str]) -> None:
        targets, unsafe = targets_of(self._host, self._states.pods(), collect_containers=True)
        if unsafe:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH, unsafe)
        pod_out: list[tuple[SeriesKey, float]] = []
        cont_out: list[tuple[SeriesKey, float]] = []
        full_supported: list[tuple[SeriesKey, float]] = []
        for target in targets:
            for stem, label in _RESOURCES:
                try:
                    path = resource_path(
                        self._host.paths,
                        self._host.mode,
                        f"{stem}.pressure",
                        target.cgroup_dir,
                        for_read=True,
                    )
                except (UnsafePath, ResourceUnsupported):
                    self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
                    break
                seen.append(str(path))
                psi = self._parse(path)
                if psi is None:
                    continue
                extra = {"pod_uid": target.pod_uid}
                if target.kind == POD:
                    out = pod_out
                    if stem == "cpu":
                        full_supported.append((target.pod_uid, 1.0 if psi.full is not None else 0.0))
                else:
                    out = cont_out
                    extra["container_id"] = target.ident
                for degree, line in (("some", psi.some), ("full", psi.full)):
                    if line is not None:
                        out.append((_pairs(label, "10", degree, **extra), line.avg10))
        for metric, samples in (
            (POD_PSI, pod_out),
            (CONTAINER_PSI, cont_out),
            (POD_PSI_CPU_FULL_SUPPORTED, full_supported),
        ):
            if samples:
                self._cache.append_batch(metric, samples, t)

    def has_synced(self) -> bool:
        return self._synced

    def close(self) -> None:
        self._fds.close()
