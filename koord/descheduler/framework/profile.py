"""A descheduler profile as a ``DeschedulerConfiguration`` (``descheduler/v1alpha2``) writes it:
``name``, ``plugins.{deschedule,balance,evict,filter}.enabled/disabled[{name}]``,
``pluginConfig[{name, args}]`` and ``nodeSelector``.

Merging follows Koordinator's ``mergePlugins``, which is kube-scheduler's
(:func:`koordshared.runtime.pluginset.merge_plugin_set`, shared with the scheduler): the defaults
(``MigrationController`` at evict and filter, nothing at deschedule and balance) minus ``disabled`` (a
name, or ``"*"``), a custom entry of the same name replacing a default in place, the other custom entries
appended. A malformed profile is a
:class:`~koordshared.runtime.errors.ConfigError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.pluginset import (
    PluginRef,
    PluginSet,
    merge_plugin_set,
    parse_plugin_set,
    plugin_config,
)

POINTS = ("deschedule", "balance", "evict", "filter")
DEFAULT_EVICTOR = "MigrationController"
DEFAULT_PROFILE_NAME = "koord-descheduler"


DEFAULT_PLUGINS: Mapping[str, PluginSet] = {
    "evict": PluginSet((PluginRef(DEFAULT_EVICTOR),)),
    "filter": PluginSet((PluginRef(DEFAULT_EVICTOR),)),
}


@dataclass(frozen=True, slots=True)
class Profile:
    name: str = DEFAULT_PROFILE_NAME
    plugins: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Extension point -> the enabled plugin names after merging, in order."""
    plugin_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    node_selector: LabelSelector | None = None
    """``None``: every node the global selector left."""

    def enabled(self, point: str) -> tuple[str, ...]:
        return self.plugins.get(point, ())

    def names(self) -> list[str]:
        """Every plugin enabled anywhere, in first-seen order."""
        seen: dict[str, None] = {}
        for point in POINTS:
            for name in self.enabled(point):
                seen.setdefault(name, None)
        return list(seen)


def _plugins(raw: Any, where: str) -> dict[str, tuple[str, ...]]:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object keyed by extension point ({', '.join(POINTS)})")
    unknown = sorted(set(raw) - set(POINTS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown extension point(s) {', '.join(unknown)}; known: {', '.join(POINTS)}"
        )
    return {
        p: merge_plugin_set(
            DEFAULT_PLUGINS.get(p, PluginSet()), parse_plugin_set(raw.get(p), f"{where}.{p}", weights=False)
        ).names()
        for p in POINTS
    }


def parse_node_selector(raw: Any, where: str) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` object; ``None`` when absent (no restriction)."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raise ConfigError(
            f"{where}: want a label selector object ({{matchLabels: {{...}}, matchExpressions: [...]}}), "
            f"got the string {raw!r}"
        )
    selector = parse_selector(raw)
    if selector.error:
        raise ConfigError(f"{where}: {selector.error}")
    return selector


def parse_profiles(raw: Any, where: str) -> tuple[Profile, ...]:
    """``profiles`` of a DeschedulerConfiguration (absent or empty: one default profile)."""
    if raw is None or raw == []:
        raw = [{}]
    if not isinstance(raw, list) or not all(isinstance(p, Mapping) for p in raw):
        raise ConfigError(f"{where}: want a list of profile objects")
    out: list[Profile] = []
    for i, p in enumerate(raw):
        at = f"{where}[{i}]"
        unknown = sorted(set(p) - {"name", "plugins", "pluginConfig", "nodeSelector"})
        if unknown:
            raise ConfigError(f"{at}: unknown field(s) {', '.join(unknown)}")
        name = p.get("name") or ""
        if not isinstance(name, str):
            raise ConfigError(f"{at}.name: want a string")
        if not name:
            if len(raw) > 1:
                raise ConfigError(f"{at}.name: required when there are several profiles")
            name = DEFAULT_PROFILE_NAME
        if any(o.name == name for o in out):
            raise ConfigError(f"{at}.name: duplicate profile name {name!r}")
        out.append(
            Profile(
                name=name,
                plugins=_plugins(p.get("plugins"), f"{at}.plugins"),
                plugin_config=plugin_config(p.get("pluginConfig"), f"{at}.pluginConfig"),
                node_selector=parse_node_selector(p.get("nodeSelector"), f"{at}.nodeSelector"),
            )
        )
    return tuple(out)
