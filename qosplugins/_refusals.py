"""Warnings of the node QoS plugins, once per cause: they re-ask for the same values every second, so a
value the executor refuses (or a block device that does not exist) would otherwise be logged every tick
until the NodeSLO changes. Sees only :mod:`koordlet.api`."""

from __future__ import annotations

from collections.abc import Iterable

from koordlet import api


class Refusals:
    """Logs a refused write when its error first appears (or changes), and a message once."""

    def __init__(self, ctx: api.PluginContext) -> None:
        self._ctx = ctx
        self._last: dict[tuple[str, str, str], str] = {}
        self._said: set[str] = set()

    def report(self, results: Iterable[api.UpdateResult]) -> None:
        for r in results:
            u = r.update
            key = (u.resource, u.cgroup_dir, u.value.partition(" ")[0])
            if r.ok:
                self._last.pop(key, None)
            elif self._last.get(key) != r.error:
                self._last[key] = r.error
                where = f" on {u.cgroup_dir}" if u.cgroup_dir else ""
                self._ctx.logger.warning("%s=%s%s refused: %s", u.resource, u.value, where, r.error)

    def once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self._ctx.logger.warning("%s", message)
