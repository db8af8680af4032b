"""Hand-written fakes of the ``koordlet.api`` services: states, metrics, host, executor, evictor.

The fakes keep state in plain dicts and record every call, so tests assert on behaviour (what was
written, in which order, who was evicted) rather than on mocks. ``FakeExecutor`` applies writes to the
``FakeHostReader``'s values and, on a v1 host, refuses cpuset writes in the kernel's bad orders (EBUSY when
a parent would shrink below a child, EACCES when a child would grow beyond its parent). A contract suite
runs the same checks against these fakes and the agent's real host reader on a fake tree, so they agree.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable, Mapping, Sequence

from koordlet import api
from koordlet.testing.builders import QOS_TIER


class FakeStates:
    """``StatesReader`` over attributes a test sets directly (``node_info``, ``pod_list``, ``slo``,
    ``synced``)."""

    def __init__(
        self,
        node: api.NodeInfo | None = None,
        pods: Sequence[api.PodInfo] = (),
        slo: api.NodeSLO | None = None,
    ) -> None:
        self.node_info = node
        self.pod_list: list[api.PodInfo] = list(pods)
        """Pods in the order the agent would list them; replace or append to it."""
        self.slo = slo or api.NodeSLO()
        self.synced = True

    def node(self) -> api.NodeInfo | None:
        return self.node_info

    def pods(self) -> Sequence[api.PodInfo]:
        return tuple(self.pod_list)

    def node_slo(self) -> api.NodeSLO:
        return self.slo

    def has_synced(self) -> bool:
        return self.synced


class FakeMetrics:
    """``MetricReader`` over series a test appends to; windows are judged by the fake clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._series: dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[float, float]]] = {}
        self.queries = 0

    def set(
        self, metric: str, value: float, labels: Mapping[str, str] | None = None, at: float | None = None
    ) -> None:
        key = (metric, frozenset((labels or {}).items()))
        self._series.setdefault(key, []).append((self._clock() if at is None else at, float(value)))

    def clear(self, metric: str | None = None) -> None:
        for key in [k for k in self._series if metric is None or k[0] == metric]:
            del self._series[key]

    def query(
        self,
        metric: str,
        *,
        window: float,
        agg: api.Aggregation = "last",
        labels: Mapping[str, str] | None = None,
    ) -> api.QueryResult | None:
        self.queries += 1
        now = self._clock()
        want = set((labels or {}).items())
        samples = [
            s
            for (name, props), series in self._series.items()
            if name == metric and want <= set(props)
            for s in series
            if now - window <= s[0] <= now
        ]
        if not samples:
            return None
        samples.sort()
        values = [v for _, v in samples]
        duration = samples[-1][0] - samples[0][0]
        if agg == "last":
            value = values[-1]
        elif agg == "avg":
            value = sum(values) / len(values)
        elif agg == "count":
            value = float(len(values))
        else:
            ordered = sorted(values)
            rank = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}[agg]
            value = ordered[max(int(len(ordered) * rank) - 1, 0)]
        return api.QueryResult(value=value, count=len(values), duration=duration)


class FakeHostReader:
    """``HostReader`` over a dict ``(resource, cgroup_dir) -> value`` and a set of cgroup dirs.

    Values are what the agent's host reader returns on either cgroup version: Koordinator's v1 meaning
    (``cpu.cfs_quota_us`` is ``-1`` or microseconds even where the kernel has ``cpu.max``).
    """

    def __init__(self, version: int = 1, cpus: Sequence[api.CPUInfo] | None = None) -> None:
        self.version = version
        self.topology = list(cpus if cpus is not None else (api.CPUInfo(0, 0), api.CPUInfo(1, 1)))
        self.values: dict[tuple[str, str], str] = {}
        self.dirs: set[str] = set()
        self.supported = {"cpu.cfs_burst_us", "cpu.cfs_quota_us", "cpuset.cpus"}
        self.broken: set[tuple[str, str]] = set()
        """``(resource, cgroup_dir)`` whose read raises, as the agent's reader does for odd content."""
        self.block_devices: dict[str, str] = {}
        """Disk name -> ``major:minor`` (``vdb``; ``/dev/vdb`` resolves by its last component)."""
        self.resctrl_why: str | None = "the fake host has no resctrl"
        """What :meth:`resctrl_unsupported` says; ``None`` for a host with resctrl control."""

    def add_cgroup(self, cgroup_dir: str, **values: str) -> None:
        """Create ``cgroup_dir`` (and parents) with resource values (``cpuset_cpus=`` for ``cpuset.cpus``)."""
        d = cgroup_dir
        while d and d not in self.dirs:
            self.dirs.add(d)
            d = posixpath.dirname(d)
        for key, value in values.items():
            self.values[(key.replace("_", ".", 1), cgroup_dir)] = value

    def remove_cgroup(self, cgroup_dir: str) -> None:
        for d in [d for d in self.dirs if d == cgroup_dir or d.startswith(cgroup_dir + "/")]:
            self.dirs.discard(d)
            for key in [k for k in self.values if k[1] == d]:
                del self.values[key]

    def cgroup_version(self) -> int:
        return self.version

    def cpu_topology(self) -> Sequence[api.CPUInfo]:
        return tuple(self.topology)

    def supports(self, resource: str) -> bool:
        return resource in self.supported

    def qos_cgroup_dir(self, qos: api.KubeQOSClass) -> str:
        return QOS_TIER[qos]

    def read(self, resource: str, cgroup_dir: str) -> str | None:
        if (resource, cgroup_dir) in self.broken:
            raise api.InvalidValue(resource, cgroup_dir, "unparsable")
        if cgroup_dir not in self.dirs:
            return None
        return self.values.get((resource, cgroup_dir))

    def block_device(self, name: str) -> str:
        found = self.block_devices.get(name.rstrip("/").rsplit("/", 1)[-1])
        if found is None:
            raise api.ResourceUnsupported(f"no block device named {name!r}")
        return found

    def resctrl_unsupported(self) -> str | None:
        return self.resctrl_why

    def list_cgroups(self, cgroup_dir: str, depth: int) -> Sequence[str]:
        if cgroup_dir not in self.dirs:
            return []
        base = cgroup_dir.count("/")
        found = [d for d in self.dirs if d == cgroup_dir or d.startswith(cgroup_dir + "/")]
        found = [d for d in found if d.count("/") - base <= depth]
        return sorted(found, key=lambda d: (d.count("/"), d))


class FakeSystemWrites:
    """The executor's write kinds beyond cgroups (kernel tunables, resctrl groups, network QoS) on dict
    state a test sets up and asserts on (``sysctls``, ``resctrl_groups``, ``network_qos``); every request
    is recorded in ``updates``."""

    host: FakeHostReader
    dry_run: bool
    updates: list[api.CgroupUpdate]
    errors: list[api.UpdateResult]
    fail: dict[tuple[str, str], str]
    _lock: threading.Lock

    def init_system_writes(self) -> None:
        self.sysctls: dict[str, str] = {}
        """Tunables as the fake kernel holds them (set a test's starting values here)."""
        self.sysctl_originals: dict[str, dict[str, str]] = {}
        """Per owner, each tunable's value before that owner's first write."""
        self.resctrl_groups: dict[str, api.ResctrlUpdate | None] = {}
        """Groups that exist, with the last update applied to them."""
        self.resctrl_tasks: dict[str, set[int]] = {}
        self.network_qos: dict[str, api.NetQoSSpec] = {}
        """Uplink -> the spec in force."""

    def update_sysctl(self, name: str, value: str, *, owner: str, reason: str = "") -> api.UpdateResult:
        u = api.CgroupUpdate(name, "", value, owner, reason)
        if name not in self.sysctls:
            return self._record(u, api.UpdateResult(u, False, skipped="unsupported"))
        self.sysctl_originals.setdefault(owner, {}).setdefault(name, self.sysctls[name])
        if self.sysctls[name] == value:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        return self._record(u, self._set(u, lambda: self.sysctls.__setitem__(name, value)))

    def restore_sysctl(self, owner: str, names: Sequence[str] | None = None) -> list[api.UpdateResult]:
        mine = self.sysctl_originals.get(owner, {})
        chosen = [n for n in list(mine) if names is None or n in names]
        out = [self.update_sysctl(n, mine[n], owner=owner, reason="restore") for n in chosen]
        for n in chosen:
            mine.pop(n, None)
        return out

    def ensure_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> api.UpdateResult:
        u = api.CgroupUpdate("group", group, "mkdir", owner, reason, cacheable=False)
        if self.host.resctrl_why is not None:
            return self._record(u, api.UpdateResult(u, False, skipped="unsupported"))
        if group in self.resctrl_groups:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        return self._record(u, self._set(u, lambda: self.resctrl_groups.__setitem__(group, None)))

    def update_resctrl(self, update: api.ResctrlUpdate) -> api.UpdateResult:
        u = api.CgroupUpdate("schemata", update.group, f"{update}", update.owner, update.reason)
        if update.group not in self.resctrl_groups:
            return self._record(u, api.UpdateResult(u, False, skipped="gone"))
        if self.resctrl_groups[update.group] == update:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        return self._record(u, self._set(u, lambda: self.resctrl_groups.__setitem__(update.group, update)))

    def move_resctrl_tasks(
        self, group: str, tids: Sequence[int], *, owner: str, reason: str = ""
    ) -> api.UpdateResult:
        u = api.CgroupUpdate("tasks", group, ",".join(map(str, tids)), owner, reason, cacheable=False)
        if group not in self.resctrl_groups:
            return self._record(u, api.UpdateResult(u, False, skipped="gone"))
        new = set(tids) - self.resctrl_tasks.get(group, set())
        if not new:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        for tasks in self.resctrl_tasks.values():
            tasks.difference_update(new)  # a thread is in one group at a time
        return self._record(u, self._set(u, lambda: self.resctrl_tasks.setdefault(group, set()).update(new)))

    def remove_resctrl_group(self, group: str, *, owner: str, reason: str = "") -> api.UpdateResult:
        u = api.CgroupUpdate("group", group, "rmdir", owner, reason, cacheable=False)
        if group not in self.resctrl_groups:
            return self._record(u, api.UpdateResult(u, False, skipped="gone"))

        def remove() -> None:
            del self.resctrl_groups[group]
            self.resctrl_tasks.pop(group, None)

        return self._record(u, self._set(u, remove))

    def apply_network_qos(self, spec: api.NetQoSSpec, *, owner: str, reason: str = "") -> api.UpdateResult:
        u = api.CgroupUpdate("tc", spec.uplink, "apply", owner, reason)
        try:
            spec.validate()
        except api.InvalidValue as err:
            return self._record(u, api.UpdateResult(u, False, error=str(err)))
        if self.network_qos.get(spec.uplink) == spec:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        return self._record(u, self._set(u, lambda: self.network_qos.__setitem__(spec.uplink, spec)))

    def remove_network_qos(self, uplink: str, *, owner: str, reason: str = "") -> api.UpdateResult:
        u = api.CgroupUpdate("tc", uplink, "remove", owner, reason, cacheable=False)
        if uplink not in self.network_qos:
            return self._record(u, api.UpdateResult(u, False, skipped="unchanged"))
        return self._record(u, self._set(u, lambda: self.network_qos.pop(uplink)))

    def _record(self, u: api.CgroupUpdate, result: api.UpdateResult) -> api.UpdateResult:
        with self._lock:
            self.updates.append(u)
            if result.error:
                self.errors.append(result)
        return result

    def _set(self, u: api.CgroupUpdate, change: Callable[[], object]) -> api.UpdateResult:
        error = self.fail.get((u.resource, u.cgroup_dir))
        if error:
            return api.UpdateResult(u, False, error=error)
        if self.dry_run:
            return api.UpdateResult(u, False, skipped="dry-run")
        change()
        return api.UpdateResult(u, True)


class FakeExecutor(FakeSystemWrites):
    """``ResourceWriter`` that records every request and applies it to a ``FakeHostReader`` (the write
    kinds beyond cgroups are :class:`FakeSystemWrites`')."""

    def __init__(
        self, host: FakeHostReader, dry_run: bool = False, strict_cpuset: bool | None = None
    ) -> None:
        self.host = host
        self.dry_run = dry_run
        self.strict_cpuset = host.version == 1 if strict_cpuset is None else strict_cpuset
        self.updates: list[api.CgroupUpdate] = []
        """Every update that reached the (fake) kernel, in order (a value equal to the file's is not
        written, as the real executor skips it: those are in ``unchanged``)."""
        self.unchanged: list[api.CgroupUpdate] = []
        self.leveled: list[list[list[api.CgroupUpdate]]] = []
        self.errors: list[api.UpdateResult] = []
        self.released: list[str] = []
        self.init_system_writes()
        self.fail: dict[tuple[str, str], str] = {}
        """Inject a kernel error for ``(resource, cgroup_dir)``."""
        self.on_update: Callable[[api.CgroupUpdate], None] | None = None
        """Called as each update reaches the fake kernel (a test can act while the plugin is mid-write)."""
        self._lock = threading.Lock()

    def update(self, update: api.CgroupUpdate) -> api.UpdateResult:
        with self._lock:
            return self._apply(update)

    def update_batch(self, updates: Sequence[api.CgroupUpdate]) -> list[api.UpdateResult]:
        return [self.update(u) for u in updates]

    def leveled_update(self, levels: Sequence[Sequence[api.CgroupUpdate]]) -> list[api.UpdateResult]:
        """Like the real executor: cpusets widen to the union top-down, then narrow bottom-up; other
        values grow parents first and shrink children first."""
        self.leveled.append([list(level) for level in levels])
        flat = [u for level in levels for u in level]
        results: list[api.UpdateResult] = []
        cpuset = [u for u in flat if u.resource == "cpuset.cpus"]
        if cpuset:
            for u in cpuset:
                old = self.host.read(u.resource, u.cgroup_dir)
                union = api.parse_cpuset(u.value) | (api.parse_cpuset(old) if old else frozenset())
                widened = api.CgroupUpdate(
                    u.resource, u.cgroup_dir, api.format_cpuset(union), u.owner, u.reason, u.cacheable
                )
                results.append(self.update(widened))
            results += [self.update(u) for u in reversed(cpuset)]
        others = [u for u in flat if u.resource != "cpuset.cpus"]
        grow = [u for u in others if _num(u.value) >= _num(self.host.read(u.resource, u.cgroup_dir))]
        shrink = [u for u in others if u not in grow]
        results += [self.update(u) for u in grow]
        results += [self.update(u) for u in reversed(shrink)]
        return results

    def release(self, owner: str) -> None:
        self.released.append(owner)

    def values_written(self, resource: str, cgroup_dir: str) -> list[str]:
        return [u.value for u in self.updates if u.resource == resource and u.cgroup_dir == cgroup_dir]

    def _apply(self, u: api.CgroupUpdate) -> api.UpdateResult:
        error = self.fail.get((u.resource, u.cgroup_dir)) or self._refusal(u)
        present = u.cgroup_dir in self.host.dirs
        if (
            not error
            and present
            and u.cacheable
            and self.host.values.get((u.resource, u.cgroup_dir)) == u.value
        ):
            self.unchanged.append(u)  # as the real executor, an equal value is not written
            return api.UpdateResult(u, written=False, skipped="unchanged")
        self.updates.append(u)
        if self.on_update is not None:
            self.on_update(u)
        if error:
            result = api.UpdateResult(u, written=False, error=error)
            self.errors.append(result)
            return result
        if not present:
            return api.UpdateResult(u, written=False, skipped="gone")
        if self.dry_run:
            return api.UpdateResult(u, written=False, skipped="dry-run")
        self.host.values[(u.resource, u.cgroup_dir)] = u.value
        return api.UpdateResult(u, written=True)

    def _refusal(self, u: api.CgroupUpdate) -> str:
        if u.resource == "cpu.cfs_quota_us":
            q = int(u.value)
            if q != -1 and q < 1000:
                return f"EINVAL: quota {q}"
        if u.resource != "cpuset.cpus":
            return ""
        new = api.parse_cpuset(u.value)
        online = {c.cpu for c in self.host.topology}
        if not new or not new <= online:
            return f"ERANGE/EINVAL: cpuset {u.value!r}"
        if not self.strict_cpuset:
            return ""
        parent = self.host.read("cpuset.cpus", posixpath.dirname(u.cgroup_dir))
        if parent is not None and not new <= api.parse_cpuset(parent):
            return f"EACCES: {u.cgroup_dir} wider than its parent"
        for (res, d), v in self.host.values.items():
            child = res == "cpuset.cpus" and posixpath.dirname(d) == u.cgroup_dir
            if child and not api.parse_cpuset(v) <= new:
                return f"EBUSY: {u.cgroup_dir} narrower than child {d}"
        return ""


def _num(text: str | None) -> float:
    if text is None:
        return float("-inf")
    head = text.split()[0] if text.split() else ""
    if head in ("-1", "max"):
        return float("inf")
    try:
        return float(head)
    except ValueError:
        return float("-inf")


class FakeEvictor:
    """``Evictor`` that records evictions; ``refuse`` holds UIDs whose eviction fails."""

    def __init__(self) -> None:
        self.evicted: list[tuple[api.PodInfo, str, str]] = []
        self.recent: set[str] = set()
        self.refuse: set[str] = set()

    def evict(self, pod: api.PodInfo, reason: str, message: str) -> bool:
        if pod.uid in self.refuse:
            return False
        self.evicted.append((pod, reason, message))
        self.recent.add(pod.uid)
        return True

    def recently_evicted(self, uid: str) -> bool:
        return uid in self.recent

    @property
    def uids(self) -> list[str]:
        return [p.uid for p, _, _ in self.evicted]
