"""NodeSLO in the agent: last-good kept on refusal, standalone file reloads."""

from __future__ import annotations

import json
import os
from pathlib import Path

from koordlet.statesinformer import nodeslo
from koordlet.statesinformer.slofile import NodeSLOFile

RT = "resourceUsedThresholdWithBE"


class Recorder:
    def __init__(self) -> None:
        self.changes = 0
        self.invalid: list[str] = []

    def changed(self) -> None:
        self.changes += 1

    def refused(self, why: str) -> None:
        self.invalid.append(why)


def test_store_keeps_last_good_and_counts_generations() -> None:
    rec = Recorder()
    store = nodeslo.NodeSLOStore(on_change=rec.changed, on_invalid=rec.refused)
    assert store.current().generation == 0 and not store.seen
    assert store.apply({RT: {"enable": True, "cpuSuppressThresholdPercent": 40}})
    good = store.current()
    assert good.generation == 1 and good.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 40
    assert rec.changes == 1
    assert not store.apply({RT: {"cpuSuppressThresholdPercent": 150}})
    assert store.current() is good
    assert rec.changes == 1 and len(rec.invalid) == 1 and "150" in rec.invalid[0]
    assert not store.apply({RT: {"cpuSuppressThresholdPercent": 150}})  # re-listed: not reported twice
    assert len(rec.invalid) == 1
    assert store.apply({RT: {"enable": True, "cpuSuppressThresholdPercent": 40}})  # same again: no bump
    assert store.current().generation == 1 and rec.changes == 1
    assert store.apply({RT: {"enable": True, "cpuSuppressThresholdPercent": 45}})
    assert store.current().generation == 2 and rec.changes == 2
    assert not store.apply({RT: {"cpuSuppressThresholdPercent": 150}})  # refused again after a good one
    assert len(rec.invalid) == 2


def test_slo_file_object_or_spec_and_reload(tmp_path: Path) -> None:
    rec = Recorder()
    store = nodeslo.NodeSLOStore(on_change=rec.changed, on_invalid=rec.refused)
    path = tmp_path / "nodeslo.yaml"
    watcher = NodeSLOFile(str(path), store)
    assert watcher.check()  # absent -> defaults, seen
    assert store.seen and store.current().generation == 0
    assert not watcher.check()
    path.write_text(
        "apiVersion: slo.koordinator.sh/v1alpha1\nkind: NodeSLO\nmetadata: {name: n1}\n"
        "spec:\n  resourceUsedThresholdWithBE: {enable: true, cpuSuppressThresholdPercent: 55}\n"
    )
    assert watcher.check()
    assert store.current().resource_used_threshold_with_be.cpu_suppress_threshold_percent == 55
    assert not watcher.check()  # unchanged file: nothing re-applied
    path.write_text(json.dumps({RT: {"enable": True, "cpuSuppressThresholdPercent": 60}}))
    os.utime(path, ns=(1, 1))
    assert watcher.check()
    assert store.current().resource_used_threshold_with_be.cpu_suppress_threshold_percent == 60
    gen = store.current().generation
    path.write_text("resourceUsedThresholdWithBE: [unclosed")
    assert watcher.check()
    assert store.current().generation == gen and len(rec.invalid) == 1


def test_slo_file_with_only_a_spec_key_is_an_object(tmp_path: Path) -> None:
    store = nodeslo.NodeSLOStore(on_change=lambda: None, on_invalid=lambda why: None)
    path = tmp_path / "nodeslo.yaml"
    path.write_text("spec:\n  resourceUsedThresholdWithBE: {enable: true, cpuSuppressPolicy: cfsQuota}\n")
    assert NodeSLOFile(str(path), store).check()
    strategy = store.current().resource_used_threshold_with_be
    assert strategy.enable and strategy.cpu_suppress_policy == "cfsQuota"
