"""Feature gates: Kubernetes syntax, AllAlpha/AllBeta, koordlet's table, errors that name the problem."""

from __future__ import annotations

import pytest

import qosplugins
from koordlet.api import FeatureSpec, Stage
from koordlet.featuregates import (
    AGENT_IMPLEMENTED,
    KOORDLET_GATES,
    NOT_IMPLEMENTED,
    FeatureGate,
    koordlet_gates,
    parse_gate_string,
    source_of,
    unimplemented_enabled,
)
from koordshared.runtime.errors import ConfigError

BUILTIN = {p.name: p.feature for p in qosplugins.BUILTIN}

KOORDINATOR_GATES = {
    # pkg/features/koordlet_features.go and the runtime-hook gates, by default and stage (v1.8)
    "AuditEvents": (False, "Alpha"),
    "AuditEventsHTTPHandler": (False, "Alpha"),
    "BECPUSuppress": (True, "Beta"),
    "BECPUManager": (False, "Alpha"),
    "BECPUEvict": (False, "Alpha"),
    "CPUEvict": (False, "Alpha"),
    "CPUAllocatableEvict": (False, "Alpha"),
    "BEMemoryEvict": (False, "Alpha"),
    "MemoryEvict": (False, "Alpha"),
    "MemoryAllocatableEvict": (False, "Alpha"),
    "CPUBurst": (True, "Beta"),
    "SystemConfig": (False, "Alpha"),
    "RdtResctrl": (True, "Beta"),
    "ResctrlCollector": (False, "Alpha"),
    "CgroupReconcile": (False, "Alpha"),
    "NodeTopologyReport": (True, "Beta"),
    "Accelerators": (False, "Alpha"),
    "RDMADevices": (False, "Alpha"),
    "CPICollector": (False, "Alpha"),
    "Libpfm4": (False, "Alpha"),
    "PSICollector": (False, "Alpha"),
    "BlkIOReconcile": (False, "Alpha"),
    "ColdPageCollector": (False, "Alpha"),
    "HugePageReport": (False, "Alpha"),
    "PodResourcesProxy": (False, "Alpha"),
    "HamiCoreVGPUMonitor": (False, "Alpha"),
    "PerCPUMetric": (False, "Alpha"),
    "NodeMetricPromMetrics": (False, "Alpha"),
    "GroupIdentity": (True, "Beta"),
    "CPUSetAllocator": (True, "Beta"),
    "GPUEnvInject": (False, "Alpha"),
    "RDMADeviceInject": (False, "Alpha"),
    "BatchResource": (True, "Beta"),
    "CPUNormalization": (False, "Alpha"),
    "CoreSched": (False, "Alpha"),
    "TerwayQoS": (False, "Alpha"),
    "TCNetworkQoS": (False, "Alpha"),
    "Resctrl": (False, "Alpha"),
    "OOMScoreAdj": (False, "Alpha"),
}


def test_defaults_follow_koordlets_table() -> None:
    gates = koordlet_gates(BUILTIN)
    assert gates.enabled("BECPUSuppress") is True
    assert gates.enabled("CPUBurst") is True
    assert gates.enabled("BEMemoryEvict") is False
    assert gates.enabled("RdtResctrl") is True  # the plugin's spec: Beta, on as in koordlet
    assert KOORDLET_GATES["GroupIdentity"] == FeatureSpec(True, Stage.BETA)


def test_every_koordinator_gate_is_known_with_its_default_and_stage() -> None:
    """Koordinator's gates, each once, from the plugins or the table; NetQOS is gone
    (network QoS is Koordinator's TCNetworkQoS)."""
    gates = koordlet_gates(BUILTIN)
    assert set(KOORDINATOR_GATES) <= set(gates.known())
    # Any other gate is a built-in plugin's own (its name); the table adds none of its own.
    assert set(gates.known()) - set(KOORDINATOR_GATES) <= set(BUILTIN)
    for name, (default, stage) in KOORDINATOR_GATES.items():
        spec = gates.states([name])[0].spec
        assert (spec.default, str(spec.stage)) == (default, stage), name
    assert not set(BUILTIN) & set(KOORDLET_GATES)  # a built-in's spec lives on the plugin only
    with pytest.raises(ConfigError, match="NetQOS"):
        gates.set_from_string("NetQOS=true")


# A stand-in for the built-in plugins, so that adding a real built-in plugin (which may implement a gate
# of the table) changes none of the expectations below: adding a plugin never means editing this file.
SOME_PLUGINS = {
    "RdtResctrl": FeatureSpec(True, Stage.BETA),
    "CgroupReconcile": FeatureSpec(False, Stage.ALPHA),
}


def test_a_plugin_replaces_the_table_entry_of_its_gate() -> None:
    """A new built-in plugin for a table gate (TerwayQoS) needs no table edit: its spec wins and the
    gate stops counting as not implemented."""
    gates = koordlet_gates({**SOME_PLUGINS, "TerwayQoS": FeatureSpec(True, Stage.BETA)})
    assert gates.enabled("TerwayQoS") is True
    assert source_of("TerwayQoS", {"TerwayQoS"}) == "plugin"
    assert source_of("TerwayQoS", set(SOME_PLUGINS)) == NOT_IMPLEMENTED
    assert source_of("RdtResctrl", set(SOME_PLUGINS)) == "plugin"


def test_unimplemented_gates_that_are_on_are_reported_once_each() -> None:
    gates = koordlet_gates(SOME_PLUGINS)
    gates.set_from_string("Accelerators=true,CgroupReconcile=true,BECPUManager=true,NodeTopologyReport=false")
    off = unimplemented_enabled(gates, set(SOME_PLUGINS))
    # on (by default or by the flag) and implemented by neither a plugin nor the agent
    expected = sorted(
        g for g in gates.known() if gates.enabled(g) and g not in SOME_PLUGINS and g not in AGENT_IMPLEMENTED
    )
    assert off == expected
    assert "Accelerators" in off  # turned on, implemented by nothing here
    assert "CgroupReconcile" not in off and "NodeTopologyReport" not in off  # a plugin; turned off
    assert "GroupIdentity" in AGENT_IMPLEMENTED and "GroupIdentity" not in off  # on by default, the agent's
    assert "BECPUManager" in AGENT_IMPLEMENTED and "BECPUManager" not in off
    assert len(off) == len(set(off))
    gates.set_from_string("AllAlpha=true")
    assert "Libpfm4" in unimplemented_enabled(gates, set(SOME_PLUGINS))


def test_explicit_values_and_go_bool_spellings() -> None:
    gates = koordlet_gates(BUILTIN)
    gates.set_from_string("BECPUSuppress=false, BEMemoryEvict=T,CPUBurst=0")
    assert not gates.enabled("BECPUSuppress")
    assert gates.enabled("BEMemoryEvict")
    assert not gates.enabled("CPUBurst")


def test_all_alpha_and_all_beta_only_touch_unset_gates_of_their_stage() -> None:
    gates = koordlet_gates(BUILTIN)
    gates.set_from_string("AllAlpha=true,AllBeta=false,BECPUEvict=false")
    assert gates.enabled("BEMemoryEvict")  # alpha, via AllAlpha
    assert not gates.enabled("BECPUEvict")  # alpha, explicit wins
    assert not gates.enabled("BECPUSuppress")  # beta, via AllBeta


def test_unknown_gate_names_it_and_lists_known_gates() -> None:
    gates = koordlet_gates(BUILTIN)
    with pytest.raises(ConfigError) as err:
        gates.set_from_string("NoSuchGate=true")
    assert "NoSuchGate" in str(err.value)
    assert "BECPUSuppress" in str(err.value) and "AllAlpha" in str(err.value)


@pytest.mark.parametrize("text", ["BECPUSuppress=maybe", "BECPUSuppress", "BECPUSuppress=", "=true"])
def test_non_boolean_values_are_refused(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_gate_string(text, flag="--feature-gates")
    assert "--feature-gates" in str(err.value)


def test_locked_gate_cannot_change() -> None:
    gates = FeatureGate({"Done": FeatureSpec(True, Stage.GA, lock_to_default=True)})
    gates.set_from_string("Done=true")
    with pytest.raises(ConfigError, match="locked"):
        gates.set_from_string("Done=false")


def test_adding_a_gate_twice_with_another_spec_is_refused() -> None:
    gates = FeatureGate(KOORDLET_GATES)
    gates.add("GroupIdentity", KOORDLET_GATES["GroupIdentity"])
    with pytest.raises(ConfigError):
        gates.add("GroupIdentity", FeatureSpec(False, Stage.ALPHA))
