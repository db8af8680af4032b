"""The plugin kit's fake of the executor's write kinds beyond cgroups: kernel tunables, resctrl groups,
network QoS. :class:`~koordlet.testing.fakes.FakeExecutor` mixes it in; each kind keeps the fake kernel's
state in a plain dict that a test sets up and asserts on, and records every request in ``updates``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from koordlet import api

if TYPE_CHECKING:
    from koordlet.testing.fakes import FakeHostReader


class FakeSystemWrites:
    """Sysctl, resctrl and tc requests on dict state (``sysctls``, ``resctrl_groups``, ``network_qos``)."""

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
