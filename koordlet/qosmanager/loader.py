"""Plugin discovery and validation: built-ins, in-process registrations and entry points.

Builds the plugin table once at startup: ``qosplugins.BUILTIN`` (gated by ``--feature-gates``), then
``koordlet.api.register_qos_ext_plugin`` registrations and the ``koordlet.qos_plugins`` entry-point group
(gated by ``--qos-extension-plugins``). Any invalid plugin (missing methods, duplicate name, entry-point
name not equal to the plugin's ``name``, bad feature spec, wrong API version) is a :class:`PluginError`
naming it; we fail at startup rather than on the first tick.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from koordlet import api
from koordlet.featuregates import KOORDLET_GATES
from koordshared.runtime.errors import PluginError
from koordshared.runtime.pluginregistry import EntryPoints, group_entry_points, load_entry_points

ENTRY_POINT_GROUP = "koordlet.qos_plugins"

SOURCE_BUILTIN = "builtin"
SOURCE_REGISTERED = "registered"


@dataclass(frozen=True, slots=True)
class PluginEntry:
    """A validated plugin instance and where it came from."""

    name: str
    plugin: api.QOSPlugin
    spec: api.FeatureSpec
    source: str
    """``builtin``, ``registered`` or ``entrypoint:<distribution>``."""
    builtin: bool
    flags: tuple[api.Flag[api.OptionValue], ...] = ()
    """What the plugin declared in ``init_flags``."""
    serves: tuple[str, ...] = ()
    """More koordlet gates a built-in plugin implements (``QOSPluginBase.serves``): any of them on sets
    it up."""

    @property
    def gates(self) -> tuple[str, ...]:
        """Every gate that sets the plugin up: its own, then those it serves."""
        return (self.name, *self.serves)

    @property
    def gate_flag(self) -> str:
        return "--feature-gates" if self.builtin else "--qos-extension-plugins"


def _instantiate(name: str, obj: Any) -> Any:
    if inspect.isclass(obj):
        try:
            return obj()
        except Exception as err:
            raise PluginError(name, f"cannot be instantiated: {err!r}") from err
    return obj


def validate(
    name: str, obj: Any, *, spec: api.FeatureSpec | None = None
) -> tuple[api.QOSPlugin, api.FeatureSpec]:
    """Check the contract; return the plugin instance and its feature spec."""
    plugin = _instantiate(name, obj)
    missing = [m for m in api.REQUIRED_METHODS if not callable(getattr(plugin, m, None))]
    if missing:
        raise PluginError(name, f"missing method(s) {', '.join(missing)} of the QOSPlugin contract")
    declared = getattr(plugin, "name", None)
    if declared != name:
        raise PluginError(name, f"declares name {declared!r}; the registry/entry-point name must equal it")
    feature = spec if spec is not None else getattr(plugin, "feature", None)
    if not isinstance(feature, api.FeatureSpec):
        raise PluginError(name, "has no `feature` FeatureSpec(default, stage)")
    version = getattr(plugin, "api_version", api.API_VERSION)
    if version != api.API_VERSION:
        raise PluginError(name, f"built for koordlet.api version {version}, this agent has {api.API_VERSION}")
    return plugin, feature


def _served(name: str, plugin: api.QOSPlugin) -> tuple[str, ...]:
    served = getattr(plugin, "serves", ())
    if not isinstance(served, tuple) or not all(isinstance(g, str) and g for g in served):
        raise PluginError(name, f"`serves` must be a tuple of gate names, got {served!r}")
    unknown = [g for g in served if g not in KOORDLET_GATES]
    if unknown:
        raise PluginError(name, f"serves {', '.join(unknown)}: not koordlet gates of the table")
    return served


_entry_points = group_entry_points(ENTRY_POINT_GROUP)


def discover(
    builtins: Iterable[Any] | None = None,
    *,
    entry_points: EntryPoints = _entry_points,
    registered: dict[str, tuple[api.FeatureSpec, api.QOSPlugin]] | None = None,
) -> list[PluginEntry]:
    """Every plugin, validated, with the flags it declares, in a stable order: built-ins first, then
    extensions by name."""
    if builtins is None:
        import qosplugins

        builtins = qosplugins.BUILTIN
    table: dict[str, PluginEntry] = {}

    def put(entry: PluginEntry) -> None:
        if entry.name in table:
            raise PluginError(
                entry.name, f"duplicate plugin name (from {table[entry.name].source} and {entry.source})"
            )
        table[entry.name] = entry

    for obj in builtins:
        name = str(getattr(obj, "name", "") or getattr(obj, "__name__", repr(obj)))
        plugin, spec = validate(name, obj)
        put(PluginEntry(name, plugin, spec, SOURCE_BUILTIN, True, serves=_served(name, plugin)))
    reg = api.registered_ext_plugins() if registered is None else registered
    for name, (declared, obj) in sorted(reg.items()):
        plugin, spec = validate(name, obj, spec=declared)
        _no_served_gates(name, plugin)
        put(PluginEntry(name, plugin, spec, SOURCE_REGISTERED, False))
    for name, obj, source in load_entry_points(entry_points):
        plugin, spec = validate(name, obj)
        _no_served_gates(name, plugin)
        put(PluginEntry(name, plugin, spec, source, False))
    return _with_flags(table.values())


def _no_served_gates(name: str, plugin: api.QOSPlugin) -> None:
    if getattr(plugin, "serves", ()):
        raise PluginError(name, "only built-in plugins serve koordlet gates (`serves`); use its own gate")


def _with_flags(entries: Iterable[PluginEntry]) -> list[PluginEntry]:
    """Call ``init_flags`` on every plugin (enabled or not, so ``--help`` lists them all)."""
    seen: dict[str, str] = {}
    out: list[PluginEntry] = []
    for entry in entries:
        flags = api.FlagSet(entry.name)
        try:
            entry.plugin.init_flags(flags)
        except PluginError:
            raise
        except Exception as err:
            raise PluginError(entry.name, f"init_flags failed: {err!r}") from err
        for flag in flags:
            if flag.name in seen:
                raise PluginError(entry.name, f"flag --{flag.name} already declared by {seen[flag.name]}")
            seen[flag.name] = entry.name
        out.append(dataclasses.replace(entry, flags=tuple(flags)))
    return out
