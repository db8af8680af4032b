"""Feature gates with Kubernetes semantics (``--feature-gates`` and ``--qos-extension-plugins``).

Where a gate's spec comes from: a built-in plugin carries its own (``feature`` on the class) and provides
its gate; :data:`KOORDLET_GATES` holds the rest of Koordinator's koordlet gates (names, defaults and stages
as in ``pkg/features/koordlet_features.go``), so a Koordinator DaemonSet's ``--feature-gates`` is accepted
whole. A plugin whose name is in that table replaces the entry (:meth:`FeatureGate.provide`): adding a
plugin never means editing the table. :data:`AGENT_IMPLEMENTED` says which of the table's gates a part of
the agent other than a plugin honours; every other table gate is accepted, warned about once at start
when on (:func:`unimplemented_enabled`) and listed as "not implemented" by ``koordlet plugins list``.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from koordlet.api import FeatureSpec, Stage
from koordshared.runtime.errors import ConfigError

A, B = Stage.ALPHA, Stage.BETA

KOORDLET_GATES: Mapping[str, FeatureSpec] = {
    "AuditEvents": FeatureSpec(False, A),
    "AuditEventsHTTPHandler": FeatureSpec(False, A),
    "BECPUManager": FeatureSpec(False, A),
    "CPUEvict": FeatureSpec(False, A),
    "CPUAllocatableEvict": FeatureSpec(False, A),
    "MemoryEvict": FeatureSpec(False, A),
    "MemoryAllocatableEvict": FeatureSpec(False, A),
    "ResctrlCollector": FeatureSpec(False, A),
    "NodeTopologyReport": FeatureSpec(True, B),
    "Accelerators": FeatureSpec(False, A),
    "RDMADevices": FeatureSpec(False, A),
    "CPICollector": FeatureSpec(False, A),
    "Libpfm4": FeatureSpec(False, A),
    "PSICollector": FeatureSpec(False, A),
    "ColdPageCollector": FeatureSpec(False, A),
    "HugePageReport": FeatureSpec(False, A),
    "PodResourcesProxy": FeatureSpec(False, A),
    "HamiCoreVGPUMonitor": FeatureSpec(False, A),
    "PerCPUMetric": FeatureSpec(False, A),
    "NodeMetricPromMetrics": FeatureSpec(False, A),
    "GroupIdentity": FeatureSpec(True, B),
    "CPUSetAllocator": FeatureSpec(True, B),
    "GPUEnvInject": FeatureSpec(False, A),
    "RDMADeviceInject": FeatureSpec(False, A),
    "BatchResource": FeatureSpec(True, B),
    "CPUNormalization": FeatureSpec(False, A),
    "CoreSched": FeatureSpec(False, A),
    "TerwayQoS": FeatureSpec(False, A),
    "Resctrl": FeatureSpec(False, A),
    "OOMScoreAdj": FeatureSpec(False, A),
}
"""Koordinator's koordlet gates that no built-in plugin provides (runtime-hook gates included)."""

AGENT_IMPLEMENTED: Mapping[str, str] = {
    "BECPUManager": "BECPUSuppress: BE cpusets are the runtime hook's, suppression only recovers",
    "NodeMetricPromMetrics": "statesinformer: koordlet_node_metric_* gauges from each NodeMetric report",
    "AuditEvents": "always on: the resource executor's audit log",
    "AuditEventsHTTPHandler": "always on: /events",
    "PSICollector": "always on: metricsadvisor's PSI collector (where the kernel has PSI)",
    "CPICollector": "metricsadvisor's CPI collector (where perf can count cycles and instructions)",
    "ResctrlCollector": "metricsadvisor's resctrl collector, with --enable-resctrl-collector",
    "NodeTopologyReport": "statesinformer: this node's NodeResourceTopology, created and kept up to date",
    "HugePageReport": "statesinformer: huge pages per NUMA zone of the NodeResourceTopology",
    "GroupIdentity": "runtimehooks: cpu.bvt_warp_ns by QoS class (where the kernel has it)",
    "CPUSetAllocator": "runtimehooks: bound cpusets from resource-status, share pools, quota lifted",
    "BatchResource": "runtimehooks: BE pods' batch-cpu/batch-memory as shares, quota, memory limit",
    "CoreSched": "runtimehooks: core-scheduling cookies per group (where the kernel has them)",
    "OOMScoreAdj": "runtimehooks: oom_score_adj of container processes from pod annotations",
}
"""Table gates honoured by a part of the agent that is not a plugin, and how."""

NOT_IMPLEMENTED = "not implemented"

ALL_ALPHA = "AllAlpha"
ALL_BETA = "AllBeta"
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(name: str, text: str, *, flag: str) -> bool:
    """Go's ``strconv.ParseBool``: anything else is an error naming the gate and the value."""
    value = text.strip()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{flag}: invalid value {text!r} for {name}: want true or false")


def parse_gate_string(text: str, *, flag: str) -> dict[str, bool]:
    """``"A=true, B=false"`` → ``{"A": True, "B": False}``; empty items are ignored like Kubernetes."""
    out: dict[str, bool] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"{flag}: missing bool value for {item!r}: use Name=true or Name=false")
        out[name] = parse_bool(name, value, flag=flag)
    return out


@dataclass(frozen=True, slots=True)
class GateState:
    name: str
    spec: FeatureSpec
    enabled: bool
    explicit: bool


class FeatureGate:
    """A set of known gates and their effective states."""

    def __init__(self, known: Mapping[str, FeatureSpec], *, flag: str = "--feature-gates") -> None:
        self._known = dict(known)
        self._set: dict[str, bool] = {}
        self._flag = flag

    def add(self, name: str, spec: FeatureSpec) -> None:
        """Register another gate (a plugin's); the same name with a different spec is refused."""
        if name in (ALL_ALPHA, ALL_BETA):
            raise ConfigError(f"{name!r} is reserved and cannot name a gate")
        old = self._known.get(name)
        if old is not None and old != spec:
            raise ConfigError(f"gate {name} registered twice with different specs ({old} vs {spec})")
        self._known[name] = spec

    def provide(self, name: str, spec: FeatureSpec) -> None:
        """A built-in plugin's gate: its spec replaces a table entry of the same name."""
        if name in (ALL_ALPHA, ALL_BETA):
            raise ConfigError(f"{name!r} is reserved and cannot name a gate")
        self._known[name] = spec

    def explicit(self) -> set[str]:
        """Gates set by name (not through AllAlpha/AllBeta or their default)."""
        return set(self._set) - {ALL_ALPHA, ALL_BETA}

    def known(self) -> list[str]:
        return sorted(self._known)

    def set_from_map(self, values: Mapping[str, bool]) -> None:
        """Apply explicit settings; unknown names and locked gates raise :class:`ConfigError`."""
        for name, value in values.items():
            if name in (ALL_ALPHA, ALL_BETA):
                continue
            spec = self._known.get(name)
            if spec is None:
                raise ConfigError(
                    f"{self._flag}: unrecognized feature gate: {name}. Known gates: "
                    + ", ".join([ALL_ALPHA, ALL_BETA, *self.known()])
                )
            if spec.lock_to_default and value != spec.default:
                raise ConfigError(
                    f"{self._flag}: cannot set feature gate {name} to {value}, locked to {spec.default}"
                )
        self._set.update(values)

    def set_from_string(self, text: str) -> None:
        self.set_from_map(parse_gate_string(text, flag=self._flag))

    def enabled(self, name: str) -> bool:
        spec = self._known.get(name)
        if spec is None:
            raise KeyError(name)
        if name in self._set:
            return self._set[name]
        if spec.stage is Stage.ALPHA and ALL_ALPHA in self._set:
            return self._set[ALL_ALPHA]
        if spec.stage is Stage.BETA and ALL_BETA in self._set:
            return self._set[ALL_BETA]
        return spec.default

    def states(self, names: Iterable[str] | None = None) -> list[GateState]:
        chosen = sorted(self._known) if names is None else list(names)
        return [GateState(n, self._known[n], self.enabled(n), n in self._set) for n in chosen]


def koordlet_gates(plugins: Mapping[str, FeatureSpec]) -> FeatureGate:
    """``--feature-gates``: :data:`KOORDLET_GATES` with the built-in plugins' gates (``name -> spec``)."""
    gates = FeatureGate(KOORDLET_GATES, flag="--feature-gates")
    for name, spec in plugins.items():
        gates.provide(name, spec)
    return gates


def source_of(name: str, plugins: Collection[str]) -> str:
    """What provides gate ``name``: ``plugin``, ``agent`` (:data:`AGENT_IMPLEMENTED`) or nothing."""
    if name in plugins:
        return "plugin"
    return "agent" if name in AGENT_IMPLEMENTED else NOT_IMPLEMENTED


def unimplemented_enabled(gates: FeatureGate, plugins: Collection[str]) -> list[str]:
    """Gates that are on (by default, explicitly or through AllAlpha/AllBeta) and that nothing in this
    agent implements, sorted: each gets one warning at start."""
    return [n for n in gates.known() if gates.enabled(n) and source_of(n, plugins) == NOT_IMPLEMENTED]
