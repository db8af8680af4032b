"""NodeSLO specs and files, fuzzed: a spec is taken or refused (never raised), a refused one leaves the
last good NodeSLO in force and is reported once however often it is seen again, a taken one is within
the bounds plugins rely on without checking."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet.statesinformer.nodeslo import NodeSLOStore
from koordlet.statesinformer.slofile import NodeSLOFile
from tests.support.paths import ROOT
from tests.support.strategies import json_values, mutations, text_mutations

EXAMPLE_FILE = ROOT / "deploy" / "daemonset" / "nodeslo-example.yaml"
EXAMPLE: dict[str, Any] = yaml.safe_load(EXAMPLE_FILE.read_text())
SPEC: dict[str, Any] = EXAMPLE["spec"]


def within_bounds(store: NodeSLOStore) -> None:
    t = store.current().resource_used_threshold_with_be
    assert 0 < t.cpu_suppress_threshold_percent <= 100
    assert t.cpu_suppress_policy in ("cpuset", "cfsQuota")
    assert 0 < t.memory_evict_threshold_percent <= 100
    assert 0 <= t.memory_evict_lower < t.memory_evict_threshold_percent
    if t.cpu_suppress_min_percent is not None:
        assert 0 <= t.cpu_suppress_min_percent <= t.cpu_suppress_threshold_percent


@settings(max_examples=300)
@given(json_values | mutations(SPEC) | st.builds(lambda s: {"resourceUsedThresholdWithBE": s}, json_values))
def test_a_spec_is_taken_or_refused_and_the_last_good_stays(spec: Any) -> None:
    refused: list[str] = []
    store = NodeSLOStore(on_invalid=refused.append)
    assert store.apply(SPEC)
    good = store.current()
    if store.apply(spec):
        assert refused == []
        within_bounds(store)
    else:
        assert store.current() is good and len(refused) == 1
        assert refused[0]  # says why
        assert store.apply(spec) is False and len(refused) == 1  # seen again (a re-list): not again
        assert (
            store.apply(SPEC)
            and store.current().resource_used_threshold_with_be == good.resource_used_threshold_with_be
        )


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(text_mutations(EXAMPLE_FILE.read_text()) | st.text(max_size=300) | st.binary(max_size=300))
def test_a_nodeslo_file_never_breaks_the_store(content: str | bytes) -> None:
    refused: list[str] = []
    store = NodeSLOStore(on_invalid=refused.append)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nodeslo.yaml"
        path.write_text(EXAMPLE_FILE.read_text())
        watcher = NodeSLOFile(str(path), store)
        assert watcher.check()
        good = store.current()
        if isinstance(content, bytes):
            path.write_bytes(content + b"\n#changed")
        else:
            path.write_text(content + "\n#changed")
        assert watcher.check()
        if refused:
            assert store.current() is good and len(refused) == 1
            assert not watcher.check() and len(refused) == 1  # unchanged file: nothing new to say
        else:
            within_bounds(store)
