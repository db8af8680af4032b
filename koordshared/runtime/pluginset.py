"""The profile shape the scheduler and the descheduler frameworks share: plugin sets per extension point
(``plugins.<point>.enabled/disabled[{name, weight}]``), their merge over the defaults, ``pluginConfig``
args, and building one plugin from a registry, with one error for a bad plugin or bad args.

The merge is kube-scheduler's ``mergePluginSet`` (``pkg/scheduler/apis/config/v1/default_plugins.go``),
which Koordinator's descheduler copies: the defaults not disabled (a name, or ``"*"`` for all of them),
each replaced in place by a custom entry of the same name, then the other custom entries in order. A
plugin listed twice at one point survives the merge and is refused when the framework is built
(:func:`refuse_duplicates`), as kube-scheduler's ``NewFramework`` refuses it. Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.runtime.errors import ConfigError, InvalidArgs, PluginError
from koordshared.runtime.pluginregistry import Registry


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int = 0
    """Score weight; 0 means "not set" (kube-scheduler then takes the multiPoint weight, else 1)."""


@dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()

    def disables(self, name: str) -> bool:
        return "*" in self.disabled or name in self.disabled

    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.enabled)


def parse_plugin_set(raw: Any, where: str, *, weights: bool) -> PluginSet:
    """``{enabled: [{name, weight}], disabled: [{name}]}``; ``weights`` says whether entries may carry a
    score weight (the scheduler's may, the descheduler's may not). Malformed input is a
    :class:`ConfigError` naming the field."""
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want an object with enabled/disabled, got {raw!r}")
    unknown = sorted(set(raw) - {"enabled", "disabled"})
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    allowed = {"name", "weight"} if weights else {"name"}
    shape = "{name: <plugin>, weight: <int>}" if weights else "{name: <plugin>}"
    enabled: list[PluginRef] = []
    disabled: list[str] = []
    for key in ("enabled", "disabled"):
        items = raw.get(key) or []
        if not isinstance(items, list):
            raise ConfigError(f"{where}.{key}: want a list of {shape}")
        for i, item in enumerate(items):
            at = f"{where}.{key}[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
                raise ConfigError(f"{at}: want {shape}, got {item!r}")
            extra = sorted(set(item) - allowed)
            if extra:
                raise ConfigError(f"{at}: unknown field(s) {', '.join(extra)}")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
                raise ConfigError(f"{at}.weight: want a non-negative integer, got {weight!r}")
            if key == "enabled":
                enabled.append(PluginRef(item["name"], weight))
            else:
                disabled.append(item["name"])
    return PluginSet(tuple(enabled), tuple(disabled))


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """kube-scheduler's ``mergePluginSet`` (see the module docstring); duplicates are kept."""
    # The last custom entry of a name replaces the default, as the Go map of custom entries keeps it.
    custom_index = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    merged: list[PluginRef] = []
    if "*" not in custom.disabled:
        for ref in default.enabled:
            if ref.name in custom.disabled or ref.name in default.disabled:
                continue
            i = custom_index.get(ref.name)
            if i is not None:
                replaced.add(i)
            merged.append(ref if i is None else custom.enabled[i])
    merged += [ref for i, ref in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(tuple(merged), (*custom.disabled, *default.disabled))


def refuse_duplicates(names: Iterable[str], point: str, where: str) -> None:
    """A plugin enabled twice at one point is a configuration error (kube-scheduler: "plugin already
    registered")."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{where}: plugin {name!r} is enabled twice at {point}")
        seen.add(name)


def plugin_config(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    """``pluginConfig``: plugin name -> its ``args`` (``apiVersion``/``kind`` removed); a malformed entry,
    an unknown field or a second entry for one plugin is a :class:`ConfigError` naming it."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: want a list of {{name, args}}")
    out: dict[str, Mapping[str, Any]] = {}
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{at}: want {{name: <plugin>, args: {{...}}}}, got {item!r}")
        extra = sorted(set(item) - {"name", "args"})
        if extra:
            raise ConfigError(f"{at}: unknown field(s) {', '.join(extra)}")
        name = str(item["name"])
        if name in out:
            raise ConfigError(f"{at}: duplicate pluginConfig for {name}")
        args = item.get("args") or {}
        if not isinstance(args, Mapping):
            raise ConfigError(f"{at}.args: want an object, got {args!r}")
        out[name] = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
    return out


def build_plugin(
    registry: Registry, name: str, args: Mapping[str, Any] | None, handle: Any, where: str
) -> Any:
    """``factory(args, handle)`` of the registered plugin ``name``. Every way this can go wrong (not
    registered, args refused, a plugin calling itself by another name) is a :class:`PluginError` naming
    the plugin and ``where`` (the profile; empty where a process has one profile)."""
    at = f"{where}: " if where else ""
    entry = registry.get(name)
    if entry is None:
        raise PluginError(name, f"{at}not registered; registered plugins: {known(registry)}")
    try:
        plugin = entry.factory(dict(args) if args is not None else None, handle)
    except (InvalidArgs, ValueError, TypeError) as err:
        raise PluginError(name, f"{at}invalid args: {err}") from err
    built = getattr(plugin, "name", None)
    if built != name:
        raise PluginError(name, f"{at}({entry.source}) built a plugin named {built!r}")
    return plugin


def check_plugin_config(config: Mapping[str, Any], registry: Registry, where: str) -> None:
    """``pluginConfig`` for a plugin no one registered is a :class:`PluginError` (a typo would otherwise
    leave the intended plugin at its defaults without a word)."""
    at = f"{where}: " if where else ""
    for name in config:
        if name not in registry:
            raise PluginError(name, f"{at}pluginConfig for an unknown plugin; registered: {known(registry)}")


def known(registry: Registry) -> str:
    return ", ".join(registry.names()) or "none"
