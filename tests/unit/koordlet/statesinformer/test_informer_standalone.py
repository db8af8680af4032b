"""The StatesInformer facade in standalone mode on a FakeHost: node from host facts, discovered pods,
NodeSLO from a file (events on change, last good kept), NodeMetric written atomically every interval."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.eviction import EvictResult
from koordlet.statesinformer.informer import StatesInformer
from koordlet.system.host import Host
from koordshared.runtime.eventbus import EventBus
from koordshared.runtime.lifecycle import Supervisor, wait_for

UID = "00000000-0000-4000-8000-000000000007"
NEVER = threading.Event()


@pytest.fixture
def running(
    fake_host: Any, tmp_path: Path
) -> Iterator[tuple[StatesInformer, dict[str, int], Any, Path, CollectorRegistry]]:
    fake_host.write_meminfo(8 * 1024 * 1024, 4 * 1024 * 1024)
    fake_host.set_online_cpus([0, 1, 2, 3])
    fake_host.container_cgroup(UID, "containerd://" + "c" * 64, api.KubeQOSClass.BESTEFFORT)
    slo_file = tmp_path / "nodeslo.json"
    slo_file.write_text(
        json.dumps({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50}})
    )
    bus = EventBus()
    seen = {api.EVENT_PODS_CHANGED: 0, api.EVENT_NODE_SLO_CHANGED: 0}

    def counter(name: str) -> Any:
        return lambda: seen.__setitem__(name, seen[name] + 1)

    for name in list(seen):
        bus.subscribe(name, counter(name))
    cache = MetricCache()
    registry = CollectorRegistry()
    cfg = InformerConfig(
        node_name="node-a",
        standalone=True,
        node_slo_file=str(slo_file),
        node_slo_file_check_seconds=0.1,
        kubelet_sync_interval=0.2,
        report_interval_min_seconds=0.2,
        default_report_interval_seconds=0.2,
    )
    informer = StatesInformer(cfg, Host(fake_host.paths), cache, bus, registry)
    stop = threading.Event()
    sup = Supervisor(stop)
    informer.start(stop, sup)
    try:
        yield informer, seen, cache, slo_file, registry
    finally:
        stop.set()
        informer.shutdown()
        assert sup.join(__import__("time").monotonic() + 5) == []
        assert not sup.failed


def test_standalone_end_to_end(running: Any, fake_host: Any) -> None:
    informer, seen, cache, slo_file, registry = running
    reader: api.StatesReader = informer
    assert wait_for(reader.has_synced, NEVER, timeout=5)
    node = reader.node()
    assert node is not None and (node.cpu_capacity_milli, node.memory_capacity_bytes) == (4000, 8 * 2**30)
    assert [p.uid for p in reader.pods()] == [UID] and seen[api.EVENT_PODS_CHANGED] >= 1
    slo = reader.node_slo()
    assert slo.resource_used_threshold_with_be.cpu_suppress_threshold_percent == 50 and slo.generation == 1

    cache.append(api.POD_CPU_USAGE, {"pod_uid": UID}, 0.25)
    cache.append(api.POD_MEMORY_USAGE, {"pod_uid": UID}, 2**20)
    target = fake_host.paths.koordlet_run_dir() / "nodemetric.json"

    def reported() -> bool:
        try:
            doc = json.loads(target.read_text())
        except (OSError, ValueError):
            return False
        return [p["podUsage"]["resources"] for p in doc.get("podsMetric", [])] == [
            {"cpu": "250m", "memory": "1Mi"}
        ]

    assert wait_for(reported, NEVER, timeout=5)
    assert informer.nodemetric_status()["podsMetric"][0]["qos"] == "BE"

    # a bad file leaves the last good NodeSLO and counts it; a good change applies and publishes
    slo_file.write_text(json.dumps({"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 500}}))
    assert wait_for(
        lambda: registry.get_sample_value("koordlet_nodeslo_invalid_total") == 1.0, NEVER, timeout=5
    )
    assert reader.node_slo() is slo
    slo_file.write_text(json.dumps({"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 40}}))
    assert wait_for(lambda: reader.node_slo().generation == 2, NEVER, timeout=5)
    # the event follows the state it announces: a reader may see generation 2 a moment before it
    assert wait_for(lambda: seen[api.EVENT_NODE_SLO_CHANGED] == 2, NEVER, timeout=5), seen

    # a new pod dir appears: the PLEG or the periodic sync picks it up
    uid2 = "00000000-0000-4000-8000-000000000008"
    fake_host.pod_cgroup(uid2, api.KubeQOSClass.BURSTABLE)
    assert wait_for(lambda: len(reader.pods()) == 2, NEVER, timeout=5)
    assert registry.get_sample_value("koordlet_states_informer_pods") == 2.0
    assert registry.get_sample_value("koordlet_states_informer_degraded") == 0.0
    assert informer.evict(reader.pods()[0], "test", "no API") is EvictResult.ERROR


def test_auto_mode_without_credentials_is_standalone(fake_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    informer = StatesInformer(InformerConfig(node_name="n"), Host(fake_host.paths), MetricCache(), EventBus())
    assert informer.standalone and informer.api is None


def test_importing_the_informer_does_not_import_the_client() -> None:
    code = "import sys, koordlet.statesinformer; assert 'kubernetes' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
