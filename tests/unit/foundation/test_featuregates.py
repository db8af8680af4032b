"""Feature gates: Kubernetes syntax, AllAlpha/AllBeta, koordlet's table, errors that name the problem."""

from __future__ import annotations

import pytest

from koordlet.api import FeatureSpec, Stage
from koordlet.errors import ConfigError
from koordlet.featuregates import KOORDLET_GATES, FeatureGate, parse_gate_string


def test_defaults_follow_koordlets_table() -> None:
    gates = FeatureGate(KOORDLET_GATES)
    assert gates.enabled("BECPUSuppress") is True
    assert gates.enabled("CPUBurst") is True
    assert gates.enabled("BEMemoryEvict") is False
    assert KOORDLET_GATES["BECPUEvict"].stage is Stage.ALPHA
    assert KOORDLET_GATES["RdtResctrl"] == FeatureSpec(True, Stage.BETA)


def test_explicit_values_and_go_bool_spellings() -> None:
    gates = FeatureGate(KOORDLET_GATES)
    gates.set_from_string("BECPUSuppress=false, BEMemoryEvict=T,CPUBurst=0")
    assert not gates.enabled("BECPUSuppress")
    assert gates.enabled("BEMemoryEvict")
    assert not gates.enabled("CPUBurst")


def test_all_alpha_and_all_beta_only_touch_unset_gates_of_their_stage() -> None:
    gates = FeatureGate(KOORDLET_GATES)
    gates.set_from_string("AllAlpha=true,AllBeta=false,BECPUEvict=false")
    assert gates.enabled("BEMemoryEvict")  # alpha, via AllAlpha
    assert not gates.enabled("BECPUEvict")  # alpha, explicit wins
    assert not gates.enabled("BECPUSuppress")  # beta, via AllBeta


def test_unknown_gate_names_it_and_lists_known_gates() -> None:
    gates = FeatureGate(KOORDLET_GATES)
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
    gates.add("BECPUSuppress", KOORDLET_GATES["BECPUSuppress"])
    with pytest.raises(ConfigError):
        gates.add("BECPUSuppress", FeatureSpec(False, Stage.ALPHA))
