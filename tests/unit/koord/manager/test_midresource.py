"""Mid resources by Koordinator's ``MidResource`` plugin (v1.8), against the cases of its own test.

The node: capacity 100 cores / 210G, allocatable 100 / 200G (the kubelet holds back 10G). Pods: a prod LS
pod requesting 20 / 40G and a batch BE pod requesting 15 / 30G (below Mid: not counted). Unallocated =
capacity - reserve - prod requests = 100 - 0 - 20 = 80 cores; 210 - 10 - 40 = 160G.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koord.manager import batchresource as br
from koord.manager import midresource as mr
from koordshared.apis.configuration.slocontroller import DEFAULT_STRATEGY
from koordshared.apis.slo.nodemetric import parse_status

G = 10**9
NODE = br.node_view(
    {
        "metadata": {"name": "test-node"},
        "status": {
            "capacity": {"cpu": "100", "memory": "210G"},
            "allocatable": {"cpu": "100", "memory": "200G", "kubernetes.io/mid-cpu": "20000"},
        },
    }
)


def pod(name: str, cpu: str, mem: str, qos: str, priority: int) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "test", "name": name, "labels": {"koordinator.sh/qosClass": qos}},
        "spec": {
            "priority": priority,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
        },
        "status": {"phase": "Running"},
    }


PODS = [pod("podA", "20", "40G", "LS", 9000), pod("podB", "15", "30G", "BE", 5999)]


def status(
    usage: tuple[str, str] | None, reclaimable: tuple[str, str] | None, host_app: str = ""
) -> dict[str, Any]:
    doc: dict[str, Any] = {"updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {}}
    if usage is not None:
        doc["nodeMetric"]["nodeUsage"] = {"resources": {"cpu": usage[0], "memory": usage[1]}}
    if reclaimable is not None:
        doc["prodReclaimableMetric"] = {
            "resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}
        }
    if host_app:
        doc["hostApplicationMetric"] = [
            {"name": "app", "usage": {"resources": {"cpu": "5", "memory": "15G"}}, "priority": host_app}
        ]
    return doc


def strategy(**kw: Any) -> Any:
    return dataclasses.replace(DEFAULT_STRATEGY, enable=True, degrade_time_minutes=10, **kw)


CASES = [
    # (name, strategy, node usage, prod reclaimable, host app, usage valid, mid cpu, mid memory)
    ("valid node metric", strategy(), ("20", "45G"), ("10", "15G"), "", True, 10_000, 15 * G),
    (
        "prod reclaimable over the mid threshold",
        strategy(mid_cpu_threshold_percent=10, mid_memory_threshold_percent=20, mid_unallocated_percent=10),
        ("30", "50G"),
        ("15", "30G"),
        "",
        True,
        10_000,  # min(min(15000, 70000) + 80000 * 0.1, 100000 * 0.1)
        42 * G,  # min(30G + 160G * 0.1, 210G * 0.2)
    ),
    ("no prod reclaimable", strategy(), ("20", "45G"), None, "", True, 0, 0),
    (
        "static mode under the threshold",
        strategy(
            mid_reclaim_mode="static",
            mid_static_cpu_reserved_percent=10,
            mid_static_memory_reserved_percent=10,
            mid_cpu_threshold_percent=10,
            mid_memory_threshold_percent=20,
        ),
        ("30", "50G"),
        ("15", "30G"),
        "",
        True,
        10_000,
        21 * G,
    ),
    (
        "static mode over the threshold",
        strategy(
            mid_reclaim_mode="static",
            mid_static_cpu_reserved_percent=100,
            mid_static_memory_reserved_percent=100,
            mid_cpu_threshold_percent=10,
            mid_memory_threshold_percent=20,
        ),
        ("30", "50G"),
        ("15", "30G"),
        "",
        True,
        10_000,
        42 * G,
    ),
    ("node usage missing: nothing unused", strategy(), None, ("20", "20G"), "", False, 0, 0),
    (
        "prod reclaimable over what is unused",
        strategy(),
        ("90", "200G"),
        ("20", "20G"),
        "",
        True,
        10_000,
        10 * G,
    ),
    (
        "a prod host application raises the reserve",
        strategy(mid_unallocated_percent=100),
        ("30", "50G"),
        ("0", "0"),
        "koord-prod",
        True,
        75_000,
        155 * G,
    ),
    (
        "a mid host application does not",
        strategy(mid_unallocated_percent=100),
        ("30", "50G"),
        ("0", "0"),
        "koord-mid",
        True,
        80_000,
        160 * G,
    ),
]


@pytest.mark.parametrize(
    ("name", "strat", "usage", "reclaimable", "host_app", "valid", "cpu", "memory"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_mid_allocatable_as_koordinator_computes_it(
    name: str,
    strat: Any,
    usage: tuple[str, str] | None,
    reclaimable: tuple[str, str] | None,
    host_app: str,
    valid: bool,
    cpu: int,
    memory: int,
) -> None:
    got = mr.calculate(
        strat, NODE, PODS, parse_status(status(usage, reclaimable, host_app)), usage_valid=valid
    )
    assert (got.cpu, got.memory) == (cpu, memory), (got.cpu_msg, got.memory_msg)


def test_the_message_reads_as_koordinators() -> None:
    got = mr.calculate(
        strategy(), NODE, PODS, parse_status(status(("20", "45G"), ("10", "15G"))), usage_valid=True
    )
    assert got.cpu_msg == (
        "midAllocatable[CPU(milli-core)]:10000 = min(min(ProdReclaimable:10000, NodeUnused:80000) + "
        "Unallocated:80000 * midUnallocatedRatio:0, NodeCapacity:100000 * thresholdRatio:1)"
    )


def test_the_node_view_reads_the_mid_resources_it_has() -> None:
    assert NODE.mid_capacity == (20_000, None)
