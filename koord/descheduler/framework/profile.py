"""A descheduler profile as a ``DeschedulerConfiguration`` (``descheduler/v1alpha2``) writes it:
``name``, ``plugins.{deschedule,balance,evict,filter}.enabled/disabled[{name}]``,
``pluginConfig[{name, args}]`` and ``nodeSelector``.

Merging follows Koordinator's ``mergePlugins``: the defaults (``MigrationController`` at evict and
filter, nothing at deschedule and balance) minus ``disabled`` (a name, or ``"*"``), a custom entry of
the same name replacing a default in place, the other custom entries appended. A malformed profile is a
:class:`~koord.runtime.errors.ConfigError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.apis.selector import LabelSelector, parse_selector
from koord.runtime.errors import ConfigError
from koord.runtime.pluginregistry import plugin_config

POINTS = ("deschedule", "balance", "evict", "filter")
DEFAULT_EVICTOR = "MigrationController"
DEFAULT_PROFILE_NAME = "koord-descheduler"


@dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()


DEFAULT_PLUGINS: Mapping[str, PluginSet] = {
    "evict": PluginSet((DEFAULT_EVICTOR,)),
    "filter": PluginSet((DEFAULT_EVICTOR,)),
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


def _names(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: want a list of {{name: <plugin>}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{where}[{i}]: want {{name: <plugin>}}, got {item!r}")
        extra = sorted(set(item) - {"name"})
        if extra:
            raise ConfigError(f"{where}[{i}]: unknown field(s) {', '.join(extra)}")
        out.append(str(item["name"]))
    return tuple(out)


def _plugin_set(raw: Any, where: str) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object with enabled/disabled")
    unknown = sorted(set(raw) - {"enabled", "disabled"})
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return PluginSet(
        _names(raw.get("enabled"), f"{where}.enabled"), _names(raw.get("disabled"), f"{where}.disabled")
    )


def merge(default: PluginSet, custom: PluginSet) -> tuple[str, ...]:
    """Koordinator's ``mergePluginSet`` (duplicates are kept here and refused when plugins are built)."""
    disabled = set(custom.disabled)
    replaced: set[int] = set()
    out: list[str] = []
    if "*" not in disabled:
        for name in default.enabled:
            if name in disabled:
                continue
            if name in custom.enabled:
                replaced.add(custom.enabled.index(name))
            out.append(name)
    out += [name for i, name in enumerate(custom.enabled) if i not in replaced]
    return tuple(out)


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
        p: merge(DEFAULT_PLUGINS.get(p, PluginSet()), _plugin_set(raw.get(p), f"{where}.{p}")) for p in POINTS
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
