"""Mid pods are placed by the ``kubernetes.io/mid-cpu``/``mid-memory`` koord-manager publishes, with the
profile of ``deploy/scheduler/koord-scheduler.yaml``: NodeResourcesFit filters by them and its scoring
counts them."""

from __future__ import annotations

from typing import Any

import yaml

from koord.scheduler.testing import MemoryScheduler
from koordshared.testing import node, pod
from tests.support.paths import ROOT

S = "koord-scheduler"


def deploy_config() -> dict[str, Any]:
    for doc in yaml.safe_load_all((ROOT / "deploy" / "scheduler" / "koord-scheduler.yaml").read_text()):
        if doc and doc.get("kind") == "ConfigMap":
            config: dict[str, Any] = yaml.safe_load(doc["data"]["koord-scheduler-config.yaml"])
            return config
    raise LookupError("no ConfigMap")


def mid_node(name: str, mid_cpu: str, mid_memory: str) -> dict[str, Any]:
    n = node(name, "8", "32Gi")
    for section in ("allocatable", "capacity"):
        n["status"].setdefault(section, {}).update(
            {"kubernetes.io/mid-cpu": mid_cpu, "kubernetes.io/mid-memory": mid_memory}
        )
    return n


def mid_pod(name: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = {"kubernetes.io/mid-cpu": cpu, "kubernetes.io/mid-memory": memory}
    p = pod(
        name,
        requests=resources,
        limits=resources,
        labels={"koordinator.sh/priority-class": "koord-mid"},
        scheduler_name=S,
        uid=name,
    )
    return p


def test_the_deploy_profile_scores_mid_resources() -> None:
    fit = next(c for c in deploy_config()["profiles"][0]["pluginConfig"] if c["name"] == "NodeResourcesFit")
    names = [r["name"] for r in fit["args"]["scoringStrategy"]["resources"]]
    assert {"kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"} <= set(names)


def test_mid_pods_go_where_mid_resources_are_and_wait_where_none_are_left() -> None:
    k = MemoryScheduler(deploy_config())
    try:
        k.add_node(mid_node("small", "1k", "2Gi"))
        k.add_node(mid_node("large", "4k", "8Gi"))
        k.add_pod(mid_pod("m1", "2k", "4Gi"))
        k.run()
        assert k.bound() == {"default/m1": "large"}  # only "large" has 2 mid cores
        k.add_pod(mid_pod("m2", "500", "512Mi"))
        k.run()
        # LeastAllocated counts mid resources: "small" scores 50 + 75 on them, "large" 37.5 + 43.75.
        assert k.bound()["default/m2"] == "small"
        k.add_pod(mid_pod("m3", "3k", "1Gi"))
        k.run()
        assert "default/m3" not in k.bound()
        messages = [e[3] for e in k.events("FailedScheduling")]
        assert any("Insufficient kubernetes.io/mid-cpu" in m for m in messages), messages
    finally:
        k.stop()
