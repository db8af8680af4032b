"""Pod and container usage (PodResourceCollector + PodThrottledCollector) through one batch read per sweep.

Layer: ``koordlet.metricsadvisor``. For every pod dir and container dir of ``states.pods()`` the sweep reads,
in a single call of the batch reader (C when built) over descriptors cached across sweeps:

- CPU: ``cpuacct.usage`` ns [v1] or ``cpu.stat usage_usec`` x 1000 [v2]; cores = delta_ns / (dt x 1e9);
- memory: koordlet's working set from ``memory.stat``: ``total_inactive_anon + total_active_anon +
  total_unevictable`` [v1] or ``inactive_anon + active_anon + unevictable`` [v2], bytes;
- throttling: ``cpu.stat`` delta nr_throttled / delta nr_periods (0 when no period elapsed).

The reader is rebuilt only when the set of directories changes; dropping a pod closes its descriptors with
the old reader. A directory that vanished (ENOENT/ENODEV) yields no sample at all (never a zero) and loses
its baselines; a malformed file is counted and only that series is skipped.
"""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from koordlet import api
from koordlet.errors import ResourceUnsupported, UnsafePath
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.system import native
from koordlet.system.batchread import GONE_STATUSES, MISSING, BatchReader, FileKind
from koordlet.system.cgroups import CgroupMode, cgroup_dir_path, get_resource, resource_path
from koordlet.system.host import Host

NAME = "PodResourceCollector"
POD = "pod"
CONTAINER = "container"
_MALFORMED_STATUSES = frozenset({-errno.EINVAL, -errno.ERANGE, -errno.EOVERFLOW})

_MEM_KEYS_V1 = ("total_inactive_anon", "total_active_anon", "total_unevictable")
_MEM_KEYS_V2 = ("inactive_anon", "active_anon", "unevictable")
_THR_KEYS = ("nr_periods", "nr_throttled")


@dataclass(frozen=True, slots=True)
class PodResourceConfig:
    interval: float = 1.0
    collect_containers: bool = True
    force_python: bool = False
    """Pure-Python batch reader even when the C one is built."""


@dataclass(frozen=True, slots=True)
class Target:
    """One cgroup dir to sample: a pod (``ident`` = pod UID) or a container (``ident`` = container ID)."""

    kind: str
    ident: str
    cgroup_dir: str
    pod_uid: str


def targets_of(host: Host, pods: Sequence[api.PodInfo], collect_containers: bool) -> tuple[list[Target], int]:
    """The pod and container dirs to sample and how many were refused as unsafe."""
    out: list[Target] = []
    unsafe = 0
    layout = host.layout
    for pod in pods:
        try:
            pod_dir = pod.cgroup_dir or layout.pod_dir(pod.uid, pod.kube_qos)
        except UnsafePath:
            unsafe += 1
            continue
        out.append(Target(POD, pod.uid, pod_dir, pod.uid))
        if not collect_containers:
            continue
        for c in pod.containers:
            if not c.container_id or not c.running:
                continue
            try:
                cid = f"{c.runtime}://{c.container_id}" if c.runtime else c.container_id
                cdir = c.cgroup_dir or layout.container_dir(pod.uid, pod.kube_qos, cid)
            except UnsafePath:
                unsafe += 1
                continue
            out.append(Target(CONTAINER, c.container_id, cdir, pod.uid))
    return out, unsafe


class PodResourceCollector:
    """``collect()`` appends pod/container CPU, memory and throttled series for ``states.pods()``."""

    name = NAME

    def __init__(
        self,
        config: PodResourceConfig,
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
        self._v2 = host.mode is CgroupMode.V2
        self._cache = cache
        self._states = states
        self._shared = shared
        self._clock = clock
        self._errors = errors
        self._cpu = fw.DeltaTracker(config.interval)
        self._thr = fw.DeltaTracker(config.interval)
        self._reader: BatchReader | None = None
        self._targets: list[Target] = []
        self._signature: tuple[Target, ...] = ()
        self._dir_paths: dict[tuple[str, str], str] = {}
        self._sweeps = 0
        self.rebuilds = 0
        # (resource, file kind, wanted keys) in file order per target
        if self._v2:
            self._files: tuple[tuple[str, FileKind, tuple[str, ...]], ...] = (
                ("cpuacct.usage", FileKind.KEY_VALUE, ("usage_usec", *_THR_KEYS)),
                ("memory.stat", FileKind.KEY_VALUE, _MEM_KEYS_V2),
            )
        else:
            self._files = (
                ("cpuacct.usage", FileKind.COUNTER, ()),
                ("memory.stat", FileKind.KEY_VALUE, _MEM_KEYS_V1),
                ("cpu.stat", FileKind.KEY_VALUE, _THR_KEYS),
            )
        self._file_names = {
            r: resource_path(host.paths, host.mode, r, "", for_read=True).name for r, _, _ in self._files
        }

    # ---- reader management ----------------------------------------------------------------------

    def _dir_path(self, subsystem: str, cgroup_dir: str) -> str:
        key = (subsystem, cgroup_dir)
        path = self._dir_paths.get(key)
        if path is None:
            path = self._dir_paths[key] = str(
                cgroup_dir_path(self._host.paths, self._host.mode, subsystem, cgroup_dir)
            )
        return path

    def _sync_targets(self) -> None:
        targets, unsafe = targets_of(self._host, self._states.pods(), self.config.collect_containers)
        if unsafe:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH, unsafe)
        signature = tuple(targets)
        if signature == self._signature and self._reader is not None:
            return
        paths: list[str] = []
        kinds: list[FileKind] = []
        keys: list[tuple[str, ...]] = []
        kept: list[Target] = []
        for target in targets:
            try:
                files = [
                    f"{self._dir_path(get_resource(r).subsystem, target.cgroup_dir)}/{self._file_names[r]}"
                    for r, _, _ in self._files
                ]
            except (UnsafePath, ResourceUnsupported):
                self._errors.error(NAME, fw.ERR_UNSAFE_PATH)
                continue
            kept.append(target)
            paths.extend(files)
            kinds.extend(k for _, k, _ in self._files)
            keys.extend(ks for _, _, ks in self._files)
        self._close_reader()
        self._reader = native.open_batch_reader(paths, kinds, keys, force_python=self.config.force_python)
        self._targets = kept
        self._signature = signature
        self.rebuilds += 1
        live_keys = [(t.kind, t.ident) for t in kept]
        self._cpu.retain(live_keys)
        self._thr.retain(live_keys)
        live_dirs = {t.cgroup_dir for t in kept}
        self._dir_paths = {k: v for k, v in self._dir_paths.items() if k[1] in live_dirs}

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # ---- the sweep --------------------------------------------------------------------------------

    def collect(self) -> None:
        self._sync_targets()
        assert self._reader is not None
        res = self._reader.read()
        t = self._clock()
        status, values, offsets = res.status, res.values, res.layout.offsets
        nfiles = len(self._files)
        cap_state = self._shared.get(fw.CPU_COUNT)
        max_cores = cap_state.value * fw.CAPACITY_SLACK if cap_state is not None else float("inf")
        errs: Counter[str] = Counter()
        cpu_out: dict[str, list[tuple[str, float]]] = {POD: [], CONTAINER: []}
        mem_out: dict[str, list[tuple[str, float]]] = {POD: [], CONTAINER: []}
        thr_out: dict[str, list[tuple[str, float]]] = {POD: [], CONTAINER: []}
        v2 = self._v2
        for j, target in enumerate(self._targets):
            first = j * nfiles
            sts = status[first : first + nfiles]
            key = (target.kind, target.ident)
            if any(s in GONE_STATUSES for s in sts):
                errs[fw.ERR_GONE] += 1
                self._cpu.forget(key)
                self._thr.forget(key)
                continue
            # CPU
            cpu_off = offsets[first]
            if sts[0] != 0:
                errs[_classify(sts[0])] += 1
            elif values[cpu_off] == MISSING:
                errs[fw.ERR_MALFORMED] += 1
            else:
                ns = values[cpu_off] * 1000 if v2 else values[cpu_off]
                got = self._cpu.update(key, t, (ns,))
                if got is not None:
                    cores = got[1][0] / (got[0] * 1e9)
                    if cores > max_cores:
                        errs[fw.ERR_OVER_CAPACITY] += 1
                    else:
                        cpu_out[target.kind].append((target.ident, cores))
            # memory
            mem_off = offsets[first + 1]
            if sts[1] != 0:
                errs[_classify(sts[1])] += 1
            else:
                a, b, c = values[mem_off], values[mem_off + 1], values[mem_off + 2]
                if MISSING in (a, b, c):
                    errs[fw.ERR_MALFORMED] += 1
                else:
                    mem_out[target.kind].append((target.ident, float(a + b + c)))
            # throttling
            if v2:
                st_thr, thr_off = sts[0], cpu_off + 1
            else:
                st_thr, thr_off = sts[2], offsets[first + 2]
            if st_thr != 0:
                if not v2:
                    errs[_classify(st_thr)] += 1
                continue
            periods, throttled = values[thr_off], values[thr_off + 1]
            if periods == MISSING and throttled == MISSING and v2:
                continue  # v2 cgroup without the cpu controller: no bandwidth control, no throttling
            if MISSING in (periods, throttled):
                errs[fw.ERR_MALFORMED] += 1
                continue
            got = self._thr.update(key, t, (periods, throttled))
            if got is not None:
                dperiods, dthrottled = got[1]
                thr_out[target.kind].append((target.ident, dthrottled / dperiods if dperiods else 0.0))
        self._store(t, cpu_out, mem_out, thr_out)
        for kind, n in errs.items():
            self._errors.error(NAME, kind, n)
        fw.report_rejections(self._cpu, self._errors, NAME)
        fw.report_rejections(self._thr, self._errors, NAME)
        self._sweeps += 1

    def _store(
        self,
        t: float,
        cpu: dict[str, list[tuple[str, float]]],
        mem: dict[str, list[tuple[str, float]]],
        thr: dict[str, list[tuple[str, float]]],
    ) -> None:
        cache = self._cache
        for metric, samples in (
            (api.POD_CPU_USAGE, cpu[POD]),
            (api.POD_MEMORY_USAGE, mem[POD]),
            (api.POD_CPU_THROTTLED, thr[POD]),
            (api.CONTAINER_CPU_USAGE, cpu[CONTAINER]),
            (api.CONTAINER_MEMORY_USAGE, mem[CONTAINER]),
            (api.CONTAINER_CPU_THROTTLED, thr[CONTAINER]),
        ):
            if samples:
                cache.append_batch(metric, samples, t)
        # The baseline round has no CPU rates: publishing a zero sum then would inflate system usage.
        has_pods = any(target.kind == POD for target in self._targets)
        if cpu[POD] or not has_pods:
            self._shared.set(fw.PODS_CPU, t, sum(v for _, v in cpu[POD]))
        if mem[POD] or not has_pods:
            self._shared.set(fw.PODS_MEMORY, t, sum(v for _, v in mem[POD]))

    # ---- status -----------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """After the baseline round plus one: every present pod has had its chance to produce a rate."""
        return self._sweeps >= 2

    def open_fds(self) -> int:
        return 0 if self._reader is None else self._reader.open_fds()

    def targets(self) -> list[Target]:
        return list(self._targets)

    def close(self) -> None:
        self._close_reader()
        self._signature = ()


def _classify(status: int) -> str:
    if status in GONE_STATUSES:
        return fw.ERR_GONE
    if status in _MALFORMED_STATUSES:
        return fw.ERR_MALFORMED
    return fw.ERR_READ
