"""Pod and container usage (PodResourceCollector + PodThrottledCollector) through one batch read per sweep.

For every pod and container dir of ``states.pods()`` one call of the batch reader (C when built) reads, on
descriptors cached across sweeps, the CPU counter, ``memory.stat`` (the working set; with page-cache
collection on, the page cache too) and ``cpu.stat`` (throttling). When the pod list changes, only the pods
that changed have their dirs worked out, and the reader and the sweep plan follow them in place (a new
reader only when most targets are new). The arithmetic (rates, resets, gone cgroups) is :mod:`.podcolumns`';
a steady sweep turns no value read into a Python int (the C reader's buffers go to its C column sweep).
Details: ``docs/modules.md``."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

from koordlet import api
from koordlet.api.errors import ResourceUnsupported, UnsafePath
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.podcolumns import Columns, make_plan, plan_entry
from koordlet.metricsadvisor.targets import POD, Target, targets_of
from koordlet.system import native
from koordlet.system.batchread import BatchReader, FileKind
from koordlet.system.cgroups import CgroupMode, cgroup_dir_path, get_resource, resource_path

NAME = "PodResourceCollector"

_MEM_KEYS_V1 = ("total_inactive_anon", "total_active_anon", "total_unevictable")
_MEM_KEYS_V2 = ("inactive_anon", "active_anon", "unevictable")
_FILE_KEYS_V1 = ("total_active_file", "total_inactive_file")
_FILE_KEYS_V2 = ("active_file", "inactive_file")
_THR_KEYS = ("nr_periods", "nr_throttled")


@dataclass(frozen=True, slots=True)
class PodResourceConfig:
    interval: float = 1.0
    collect_containers: bool = True
    force_python: bool = False
    """Pure-Python batch reader even when the C one is built."""
    with_page_cache: bool = False
    """Also the ``*_memory_usage_with_page_cache`` series (``--enable-pagecache-collector``)."""


@dataclass(frozen=True, slots=True)
class _PodTargets:
    """One listed pod (the object the informer handed out) and its accepted targets."""

    pod: api.PodInfo
    members: frozenset[Target]
    targets: tuple[Target, ...]
    refused: int


class PodResourceCollector:
    """``collect()`` appends pod/container CPU, memory and throttled series for ``states.pods()``."""

    name = NAME

    def __init__(self, config: PodResourceConfig, opts: fw.Options) -> None:
        host = opts.need_host(self.name)
        cache = opts.cache
        states = opts.need_states(self.name)
        shared = opts.shared
        clock = opts.clock
        errors = opts.errors
        self.config = config
        self.interval = config.interval
        self._host = host
        self._v2 = host.mode is CgroupMode.V2
        self._cache = cache
        self._states = states
        self._shared = shared
        self._clock = clock
        self._errors = errors
        self._max_gap = config.interval * fw.MAX_GAP_FACTOR
        self._reader: BatchReader | None = None
        self._targets: list[Target] = []
        self._columns = Columns([], 1)
        self._has_pods = False
        self._last_pods: tuple[api.PodInfo, ...] = ()
        self._pods: dict[str, _PodTargets] = {}
        self._refused = 0
        """Targets of the listed pods refused as unsafe (counted again at every change of the list)."""
        self._where: dict[Target, int] = {}
        """Each target's place in the reader and the plan."""
        self._dir_paths: dict[tuple[str, str], str] = {}
        self._sweeps = 0
        self._npods = 0
        self.rebuilds = 0
        """Readers built (the first sweep, or most targets new at once)."""
        self.updates = 0
        """Target changes followed in place by the reader."""
        self._lock = threading.Lock()
        """Held for a whole sweep, so ``close`` during shutdown waits for a running sweep to finish."""
        self._closed = False
        # (resource, file kind, wanted keys) in file order per target
        file_keys: tuple[str, ...] = ()
        if config.with_page_cache:
            file_keys = _FILE_KEYS_V2 if self._v2 else _FILE_KEYS_V1
        if self._v2:
            self._files: tuple[tuple[str, FileKind, tuple[str, ...]], ...] = (
                ("cpuacct.usage", FileKind.KEY_VALUE, ("usage_usec", *_THR_KEYS)),
                ("memory.stat", FileKind.KEY_VALUE, (*_MEM_KEYS_V2, *file_keys)),
            )
        else:
            self._files = (
                ("cpuacct.usage", FileKind.COUNTER, ()),
                ("memory.stat", FileKind.KEY_VALUE, (*_MEM_KEYS_V1, *file_keys)),
                ("cpu.stat", FileKind.KEY_VALUE, _THR_KEYS),
            )
        self._file_names = {
            r: resource_path(host.paths, host.mode, r, "", for_read=True).name for r, _, _ in self._files
        }
        self._subsystems = {get_resource(r).subsystem for r, _, _ in self._files}

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
        pods = self._states.pods()
        # The informer hands out the same immutable PodInfo objects until something changes: then there
        # is nothing to recompute (the previous tuple keeps them alive, so identity cannot be reused).
        last = self._last_pods
        if self._reader is not None and len(pods) == len(last) and all(map(operator.is_, pods, last)):
            return
        self._last_pods = tuple(pods)
        old = self._pods if self._reader is not None else {}
        pods_now: dict[str, _PodTargets] = {}
        gone: list[Target] = []
        fresh: dict[Target, list[str]] = {}
        refused = self._refused if old else 0
        for pod in pods:
            uid = pod.uid
            if uid in pods_now:
                continue  # a UID listed twice: its first pod counts
            entry = old.get(uid)
            if entry is None or entry.pod is not pod:
                # only a pod new or changed has its targets (and the paths of new ones) worked out
                resolved = self._resolve(pod, entry, fresh)
                if entry is not None:
                    refused -= entry.refused
                    gone.extend(t for t in entry.targets if t not in resolved.members)
                refused += resolved.refused
                entry = resolved
            pods_now[uid] = entry
        for uid in old.keys() - pods_now.keys():
            entry = old[uid]
            refused -= entry.refused
            gone.extend(entry.targets)
        self._pods, self._refused = pods_now, refused
        if refused:
            self._errors.error(NAME, fw.ERR_UNSAFE_PATH, refused)
        if not gone and not fresh and self._reader is not None:
            return
        reader = self._reader
        total = len(self._targets) - len(gone) + len(fresh)
        if reader is None or len(fresh) * 2 > total:
            self._rebuild([t for e in pods_now.values() for t in e.targets], fresh)
        else:
            self._update(reader, gone, fresh)
        self._has_pods = self._npods > 0
        for target in gone:
            for subsystem in self._subsystems:
                self._dir_paths.pop((subsystem, target.cgroup_dir), None)

    def _resolve(
        self, pod: api.PodInfo, was: _PodTargets | None, fresh: dict[Target, list[str]]
    ) -> _PodTargets:
        """``pod``'s targets, the paths of those ``was`` did not have added to ``fresh``; a target whose
        paths are refused is left out and counted."""
        targets, refused = targets_of(self._host, (pod,), self.config.collect_containers)
        had = was.members if was is not None else frozenset()
        kept: list[Target] = []
        for target in targets:
            if target not in had:
                try:
                    fresh[target] = self._target_paths(target)
                except (UnsafePath, ResourceUnsupported):
                    refused += 1
                    continue
            kept.append(target)
        return _PodTargets(pod, frozenset(kept), tuple(kept), refused)

    def _target_paths(self, target: Target) -> list[str]:
        return [
            f"{self._dir_path(get_resource(r).subsystem, target.cgroup_dir)}/{self._file_names[r]}"
            for r, _, _ in self._files
        ]

    def _rebuild(self, kept: list[Target], files: dict[Target, list[str]]) -> None:
        """A new reader and plan over ``kept``, pods first (the first sweep, or most targets new)."""
        ordered = sorted(kept, key=lambda tg: tg.kind != POD)
        paths: list[str] = []
        for target in ordered:
            paths.extend(files[target] if target in files else self._target_paths(target))
        n = len(ordered)
        self._close_reader()
        self._reader = native.open_batch_reader(
            paths,
            [k for _ in range(n) for _, k, _ in self._files],
            [ks for _ in range(n) for _, _, ks in self._files],
            force_python=self.config.force_python,
        )
        self.rebuilds += 1
        self._targets = ordered
        self._where = {t: j for j, t in enumerate(ordered)}
        self._npods = sum(1 for t in ordered if t.kind == POD)
        plan = make_plan(self._v2, len(self._files), ordered, self._reader.layout.offsets)
        # the baselines of the targets that stay are carried over, by key
        self._columns = Columns(
            plan, 1000 if self._v2 else 1, carried=self._columns, fast=native.fast_sweep(self._reader)
        )

    def _update(self, reader: BatchReader, gone: list[Target], fresh: dict[Target, list[str]]) -> None:
        """Follow a few targets coming and going in place: the reader stays dense, pods first, every file
        that stays keeps its descriptor (a pod replaced rebuilt a reader of thousands of files), and the
        plan changes in the places that moved only."""
        nf = len(self._files)
        targets, where, npods, columns = self._targets, self._where, self._npods, self._columns

        def move(i: int, j: int) -> None:
            if i != j:
                for f in range(nf):
                    reader.swap(i * nf + f, j * nf + f)
                a, b = targets[i], targets[j]
                targets[i], targets[j] = b, a
                where[a], where[b] = j, i
                columns.swap(i, j)

        for target in gone:
            i = where[target]
            if target.kind == POD:
                move(i, npods - 1)  # the last pod's place, then the last target's
                move(npods - 1, len(targets) - 1)
                npods -= 1
            else:
                move(i, len(targets) - 1)
            targets.pop()
            del where[target]
            columns.pop()
        reader.truncate(len(targets) * nf)
        kinds = [k for _, k, _ in self._files]
        keys = [ks for _, _, ks in self._files]
        for target, paths in fresh.items():
            reader.extend(paths, kinds, keys)
            j = len(targets)
            targets.append(target)
            where[target] = j
            columns.append(plan_entry(self._v2, nf, j, target, reader.layout.offsets))
            if target.kind == POD:
                move(npods, j)  # the first container's place (it goes last)
                npods += 1
        columns.regroup()
        self._npods = npods
        self.updates += 1

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # ---- the sweep --------------------------------------------------------------------------------

    def collect(self) -> None:
        """One sweep. The loop is written flat (locals, no helper calls on the common path): it runs for
        every pod and container every second and is most of the agent's own CPU after the reads."""
        with self._lock:
            if not self._closed:
                self._sweep()

    def _sweep(self) -> None:
        self._sync_targets()
        reader = self._reader
        assert reader is not None
        failed = reader.fill()
        t = self._clock()
        cap_state = self._shared.get(fw.CPU_COUNT)
        max_ns_per_s = (cap_state.value * fw.CAPACITY_SLACK if cap_state is not None else 1e9) * 1e9
        columns = self._columns
        # The fast path writes no memory-with-page-cache series, so it stands aside when they are asked for.
        page_cache = self.config.with_page_cache
        out = None if page_cache or failed else columns.sweep(reader, t, self._max_gap, max_ns_per_s)
        errs = None
        if out is None:
            res = reader.results()
            out, errs = columns.sweep_checked(
                res.status, res.values, t, self._max_gap, max_ns_per_s, v2=self._v2, page_cache=page_cache
            )
        for metric, col_keys, col_values in out:
            if col_keys:
                self._cache.append_columns(metric, col_keys, col_values, t)
        self._publish_sums(t, out[0].values, out[1].values)
        for kind, n in (errs or {}).items():
            self._errors.error(NAME, kind, n)
        self._sweeps += 1

    def _publish_sums(self, t: float, pod_cpu: list[float], pod_mem: list[float]) -> None:
        # The baseline round has no CPU rates: publishing a zero sum then would inflate system usage.
        if pod_cpu or not self._has_pods:
            self._shared.set(fw.PODS_CPU, t, sum(pod_cpu))
        if pod_mem or not self._has_pods:
            self._shared.set(fw.PODS_MEMORY, t, sum(pod_mem))

    # ---- status -----------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """After the baseline round plus one: every present pod has had its chance to produce a rate."""
        return self._sweeps >= 2

    def open_fds(self) -> int:
        return 0 if self._reader is None else self._reader.open_fds()

    def reader_files(self) -> list[tuple[str, int]]:
        """``(path, file kind)`` of every file one sweep reads (benchmarks build their floor from it)."""
        if self._reader is None:
            return []
        layout = self._reader.layout
        return [(p, int(k)) for p, k in zip(layout.paths, layout.kinds, strict=True)]

    def read_sweep_files(self) -> bool:
        """One read of the files a sweep reads, nothing computed from it (a benchmark's floor beside the
        sweep); False before the first sweep opened them."""
        if self._reader is None:
            return False
        self._reader.fill()
        return True

    def targets(self) -> list[Target]:
        return list(self._targets)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._close_reader()
            self._last_pods = ()
            self._pods = {}
