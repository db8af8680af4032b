"""The Node object as the agent sees it: quantities and Koordinator's reservation annotation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordlet.statesinformer.node import CPU_MANAGER_POLICY_ANNOTATION, RESERVATION_ANNOTATION, node_info
from koordlet.system.paths import HostPaths


def node(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "annotations": annotations or {}},
        "status": {
            "capacity": {"cpu": "8", "memory": "16Gi"},
            "allocatable": {"cpu": "7500m", "memory": "15Gi", "kubernetes.io/batch-cpu": "3000"},
        },
    }


def test_capacity_and_allocatable_in_millicores_and_bytes() -> None:
    info = node_info(node())
    assert (info.cpu_capacity_milli, info.cpu_allocatable_milli, info.cpu_reserved_milli) == (8000, 7500, 500)
    assert info.memory_capacity_bytes == 16 << 30 and info.batch_cpu_allocatable_milli == 3000
    assert (info.reservation_cpu_milli, info.reserved_cpus) == (0, frozenset())


def test_unreported_batch_cpu_is_not_zero() -> None:
    raw = node()
    del raw["status"]["allocatable"]["kubernetes.io/batch-cpu"]
    assert node_info(raw).batch_cpu_allocatable_milli == -1  # unknown, as Koordinator's -1
    raw["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "0"
    assert node_info(raw).batch_cpu_allocatable_milli == 0


@pytest.mark.parametrize(
    ("cpu", "milli"),
    [("2", 2000), ("1.5", 1500), ("500m", 500), ("2k", 2_000_000), ("0.1m", 1), ("lots", 0), (3, 3000)],
)
def test_reservation_cpu_is_a_kubernetes_quantity(cpu: object, milli: int) -> None:
    info = node_info(node({RESERVATION_ANNOTATION: json.dumps({"resources": {"cpu": cpu}})}))
    assert info.reservation_cpu_milli == milli


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        (json.dumps({"reservedCPUs": "0-1,6"}), {0, 1, 6}),
        (json.dumps({"reservedCPUs": "1-0"}), set()),
        (json.dumps({"reservedCPUs": 3}), set()),
        ("{not json", set()),
        ("[1, 2]", set()),
    ],
)
def test_reserved_cpus_or_nothing_when_unreadable(text: str, cpus: set[int]) -> None:
    assert node_info(node({RESERVATION_ANNOTATION: text})).reserved_cpus == cpus


def test_kubelet_cpu_manager_policy_from_annotation_or_checkpoint(tmp_path: Path) -> None:
    paths = HostPaths(var_lib_kubelet=tmp_path)
    assert node_info(node(), paths).kubelet_cpu_manager_policy == ""  # neither: unknown
    (tmp_path / "cpu_manager_state").write_text('{"policyName":"static","defaultCpuSet":"0-7"}')
    assert node_info(node(), paths).kubelet_cpu_manager_policy == "static"
    annotated = node({CPU_MANAGER_POLICY_ANNOTATION: json.dumps({"policy": "none"})})
    assert node_info(annotated, paths).kubelet_cpu_manager_policy == "none"  # the annotation wins
    (tmp_path / "cpu_manager_state").write_text("not json")
    assert node_info(node(), paths).kubelet_cpu_manager_policy == ""
