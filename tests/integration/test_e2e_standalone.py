"""Standalone end-to-end on the real kernel: pods under a test kubepods parent (real processes) show in
``/nodemetric`` (and the NodeMetric file) with the right QoS classes and the usage measured meanwhile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordlet.api import KubeQOSClass
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealKubepods
from koordlet.testing.load import CPUMeter

pytestmark = pytest.mark.root


def pod_list(tmp: Path, *items: dict[str, object]) -> Path:
    path = tmp / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": list(items)}))
    return path


def test_pods_show_in_nodemetric_with_qos_and_usage(tmp_path: Path, kubepods: RealKubepods) -> None:
    be = kubepods.add_pod(KubeQOSClass.BESTEFFORT)
    kubepods.busy(kubepods.add_container(be), duty=0.5)
    ls = kubepods.add_pod(KubeQOSClass.BURSTABLE)
    kubepods.busy(kubepods.add_container(ls), duty=0.25)
    podlist = pod_list(
        tmp_path,
        {
            "metadata": {
                "uid": be.uid,
                "name": "batch-0",
                "namespace": "jobs",
                "labels": {"koordinator.sh/qosClass": "BE"},
            },
            "spec": {"containers": [{"name": "main"}]},
            "status": {"qosClass": "BestEffort", "phase": "Running"},
        },
    )
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={podlist}",
        "--collect-res-used-interval=500ms",
    )
    meter = CPUMeter(be.cgroup_dir).start()  # the agent's window opens about now
    try:
        agent.wait_ready()
        pods: dict[str, dict[str, object]] = {}

        def both_reported() -> bool:
            pods.clear()
            pods.update({p["name"]: p for p in agent.get("/nodemetric").get("podsMetric") or []})
            return "batch-0" in pods and len(pods) >= 2

        wait_until(both_reported, 40, step=0.5)
        assert "batch-0" in pods and len(pods) == 2, (pods, agent.tail())
        assert pods["batch-0"]["qos"] == "BE" and pods["batch-0"]["namespace"] == "jobs"
        other = next(p for name, p in pods.items() if name != "batch-0")
        assert other["qos"] == "LS"  # burstable tier, no label: Koordinator's default
        status: dict[str, Any] = {}

        def be_cpu() -> float:
            status.update(agent.get("/nodemetric"))
            pods = {p["name"]: p for p in status["podsMetric"]}
            return quantity_cores(pods["batch-0"]["podUsage"]["resources"]["cpu"])

        # The report averages over its window, which starts with the agent's first samples: compare it
        # with what the BE pod measurably used since then. On a busy machine the half-core process gets
        # less than half a core (its tier weighs 2 against everything else's 1024), and the report must
        # say so, not the nominal duty.
        def agrees() -> bool:
            window = meter.stop()
            used = window.cgroups[be.cgroup_dir]
            seen.append((round(be_cpu(), 3), round(used, 3)))
            return used > 0.05 and abs(seen[-1][0] - used) <= max(0.05, 0.15 * used)

        seen: list[tuple[float, float]] = []
        assert wait_until(agrees, 20, step=0.5), (seen[-5:], agent.tail())
        be_now = be_cpu()
        assert quantity_cores(status["nodeMetric"]["nodeUsage"]["resources"]["cpu"]) >= be_now
        written = tmp_path / "run" / "koordlet" / "nodemetric.json"
        # written at start (before the first samples): koordlet's shape, empty lists left out
        assert written.exists() and "nodeMetric" in json.loads(written.read_text())
    finally:
        assert agent.stop() == 0, agent.tail()


def quantity_cores(q: object) -> float:
    text = str(q)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
