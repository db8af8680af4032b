"""Feature gates with Kubernetes semantics (``--feature-gates`` and ``--qos-extension-plugins``).

``KOORDLET_GATES`` is koordlet's gate table (names, defaults and stages as in Koordinator). A
:class:`FeatureGate` parses ``Name=true,Other=false`` (values as Go's ``strconv.ParseBool``), honours
``AllAlpha``/``AllBeta`` for gates not set explicitly, refuses unknown names, non-boolean values and
changes to locked gates with a :class:`ConfigError` that names the problem and lists the known gates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from koordlet.api import FeatureSpec, Stage
from koordlet.errors import ConfigError

A, B = Stage.ALPHA, Stage.BETA

KOORDLET_GATES: Mapping[str, FeatureSpec] = {
    "AuditEvents": FeatureSpec(False, A),
    "AuditEventsHTTPHandler": FeatureSpec(False, A),
    "BECPUSuppress": FeatureSpec(True, B),
    "BECPUManager": FeatureSpec(False, A),
    "BECPUEvict": FeatureSpec(False, A),
    "CPUEvict": FeatureSpec(False, A),
    "CPUAllocatableEvict": FeatureSpec(False, A),
    "BEMemoryEvict": FeatureSpec(False, A),
    "MemoryEvict": FeatureSpec(False, A),
    "MemoryAllocatableEvict": FeatureSpec(False, A),
    "CPUBurst": FeatureSpec(True, B),
    "SystemConfig": FeatureSpec(False, A),
    "RdtResctrl": FeatureSpec(True, B),
    "ResctrlCollector": FeatureSpec(False, A),
    "CgroupReconcile": FeatureSpec(False, A),
    "NodeTopologyReport": FeatureSpec(True, B),
    "Accelerators": FeatureSpec(False, A),
    "RDMADevices": FeatureSpec(False, A),
    "CPICollector": FeatureSpec(False, A),
    "Libpfm4": FeatureSpec(False, A),
    "PSICollector": FeatureSpec(False, A),
    "BlkIOReconcile": FeatureSpec(False, A),
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
    "TCNetworkQoS": FeatureSpec(False, A),
    "Resctrl": FeatureSpec(False, A),
    "OOMScoreAdj": FeatureSpec(False, A),
    "NetQOS": FeatureSpec(False, A),
}

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
