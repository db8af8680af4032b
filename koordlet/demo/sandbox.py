"""The demo's sandbox: a kubepods tree under its own parent with one LS and a few BE pods burning CPU in real
cgroups, and the real agent (standalone) watching it. Built from the plugin kit (:class:`RealKubepods`,
the agent as a child process, the kubelet's pod objects), so the demo runs what the tests run.

The BE pods want the whole machine (one busy process per CPU between them); the LS pod idles at a tenth of
the machine until :meth:`Sandbox.spike` adds busy processes worth 40 % more. :meth:`Sandbox.close`
stops the agent (which restores the BE quota) and removes every process and cgroup made here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from koordlet.api import KubeQOSClass
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealContainer, RealKubepods
from koordlet.testing.kubelet import pod_object
from koordshared.apis.extension.qos import LABEL_PRIORITY_CLASS, LABEL_QOS

NODE = "demo-node"
BE_PODS = 3


def node_slo(policy: str, threshold: int) -> dict[str, object]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": NODE},
        "spec": {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressThresholdPercent": threshold,
                "cpuSuppressPolicy": policy,
            }
        },
    }


class Sandbox:
    def __init__(self, work: Path, *, policy: str, threshold: int, cpus: int | None = None) -> None:
        self.work = work
        self.cpus = cpus or os.cpu_count() or 1
        self.kubepods = RealKubepods(prefix="koordlet-demo")
        self.spike_procs: list[subprocess.Popen[bytes]] = []
        self.agent: Agent | None = None
        self.ls_idle = min(0.1 * self.cpus, 0.9)
        self.spike_processes = max(1, round(0.4 * self.cpus))
        items = []
        kp = self.kubepods
        ls = kp.add_pod(KubeQOSClass.BURSTABLE)
        self.ls: RealContainer = kp.add_container(ls)
        items.append(self._pod(ls.uid, "web", "Burstable", "LS", "koord-prod", 9000))
        for i in range(BE_PODS):
            be = kp.add_pod(KubeQOSClass.BESTEFFORT)
            kp.add_container(be)
            items.append(self._pod(be.uid, f"batch-{i}", "BestEffort", "BE", "koord-batch", 5000))
        self.pod_list = work / "pods.json"
        self.pod_list.write_text(json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items}))
        self.slo = work / "nodeslo.yaml"
        self.slo.write_text(yaml.safe_dump(node_slo(policy, threshold)))

    @staticmethod
    def _pod(uid: str, name: str, kube_qos: str, qos: str, band: str, priority: int) -> dict[str, object]:
        labels = {LABEL_QOS: qos, LABEL_PRIORITY_CLASS: band}
        obj = pod_object(uid, name, node=NODE, qos_class=kube_qos, labels=labels)
        obj["spec"]["priority"] = priority
        return obj

    @property
    def parent(self) -> str:
        return self.kubepods.parent

    @property
    def ls_spike_cores(self) -> float:
        return float(self.spike_processes)

    def start(self) -> Agent:
        """Start the load (LS idle, BE greedy) and the agent; returns once the agent is ready."""
        kp = self.kubepods
        kp.busy(self.ls, self.ls_idle)
        be_pods = [p for p in kp.pods if p.qos is KubeQOSClass.BESTEFFORT]
        for cpu in range(self.cpus):
            kp.busy(be_pods[cpu % len(be_pods)].containers[0])
        self.agent = Agent(
            self.work,
            f"--cgroup-root=/{self.parent}",
            f"--pod-list={self.pod_list}",
            f"--node-slo-file={self.slo}",
            env={"NODE_NAME": NODE},
        )
        self.agent.wait_ready()
        return self.agent

    def spike(self) -> None:
        for _ in range(self.spike_processes):
            self.spike_procs.append(self.kubepods.busy(self.ls, 1.0))

    def calm(self) -> None:
        self.kubepods.tree.kill(self.spike_procs)
        self.ls.procs[:] = [p for p in self.ls.procs if p not in self.spike_procs]
        self.spike_procs.clear()

    def close(self) -> int | None:
        """Stop the agent (its exit code; ``None`` if it never started) and remove everything made here."""
        code = None
        try:
            if self.agent is not None:
                code = self.agent.stop()
        finally:
            self.kubepods.cleanup()
        return code
