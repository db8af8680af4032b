"""``koordlet top --once`` against the real agent on real cgroups: the pods the test made are listed with
their QoS and a CPU usage within 10 % (or 10 millicores) of what the test measured from the same cgroups'
counters over the same window; once the agent is gone, ``top`` exits non-zero naming where it looked."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from koordlet.api import KubeQOSClass
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealKubepods, RealPod
from koordlet.testing.kubelet import pod_object

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]
WINDOW = 20.0
"""Long enough that where the agent's 1 s samples start and end (about half a second either way) moves
the average by a few percent at most, even when a loaded machine makes each second's usage differ."""


class Counters:
    """``cpuacct.usage`` of each pod, sampled every 0.1 s in a thread, for rates over any past window."""

    def __init__(self, kp: RealKubepods, pods: dict[str, RealPod]) -> None:
        self.kp, self.pods = kp, pods
        self.samples: dict[str, list[tuple[float, int]]] = {name: [] for name in pods}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for name, pod in self.pods.items():
                ns = self.kp.cpu_usage_ns(pod.cgroup_dir)
                if ns is not None:
                    self.samples[name].append((time.monotonic(), ns))
            self.stop.wait(0.1)

    def rate(self, name: str, start: float, end: float) -> float:
        series = self.samples[name]
        a = min(series, key=lambda s: abs(s[0] - start))
        b = min(series, key=lambda s: abs(s[0] - end))
        return (b[1] - a[1]) / 1e9 / (b[0] - a[0])


def test_top_once_lists_the_pods_with_qos_and_measured_usage(tmp_path: Path, kubepods: RealKubepods) -> None:
    specs = {
        "web": (KubeQOSClass.BURSTABLE, 0.5),
        "batch-0": (KubeQOSClass.BESTEFFORT, 0.35),
        "batch-1": (KubeQOSClass.BESTEFFORT, 0.2),
    }
    pods: dict[str, RealPod] = {}
    items = []
    for name, (qos, duty) in specs.items():
        pod = kubepods.add_pod(qos)
        kubepods.busy(kubepods.add_container(pod), duty)
        pods[name] = pod
        labels = {"koordinator.sh/qosClass": "BE" if qos is KubeQOSClass.BESTEFFORT else "LS"}
        items.append(pod_object(pod.uid, name, node="e2e-node", qos_class=str(qos), labels=labels))
    pod_list = tmp_path / "pods.json"
    pod_list.write_text(json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items}))
    counters = Counters(kubepods, pods)
    # Suppression off: this test is about what top shows, not about BE being throttled meanwhile.
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        f"--pod-list={pod_list}",
        "--feature-gates=BECPUSuppress=false",
    )
    try:
        agent.wait_ready()

        def sampled() -> bool:
            doc = agent.get(f"/status?window={WINDOW:g}")
            got = {p["name"]: p for p in doc["pods"] if p["cpuCores"] is not None}
            oldest = doc["time"] - doc["agent"]["startedAt"]
            return set(got) == set(specs) and oldest > WINDOW + 2

        assert wait_until(sampled, WINDOW + 40, step=0.5), agent.tail()
        asked = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "koordlet", "top", "--once", f"--window={WINDOW:g}", "--addr", agent.base],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        rows = {
            line.split()[0]: line.split() for line in out.stdout.splitlines() if line.startswith("default/")
        }
        assert set(rows) == {f"default/{n}" for n in specs}, out.stdout
        # The agent's figure averages its 1 s samples of the last WINDOW seconds, each covering the second
        # before it: the same span of counters ends about half a collection interval before the question.
        end = asked - 0.5
        for name, (qos, _duty) in specs.items():
            row = rows[f"default/{name}"]
            assert row[1] == ("BE" if qos is KubeQOSClass.BESTEFFORT else "LS"), row
            assert row[2] == str(qos), row
            shown = float(row[-2])
            measured = counters.rate(name, end - WINDOW, end)
            # 10 %, or 10 millicores for a pod a loaded machine starves (a few percent of a core, where a
            # second more or less of contention inside the window is already more than 10 %).
            assert abs(shown - measured) <= max(0.1 * measured, 0.01), (name, shown, measured, out.stdout)
    finally:
        counters.stop.set()
        code = agent.stop()
    assert code == 0, agent.tail()
    gone = subprocess.run(
        [sys.executable, "-m", "koordlet", "top", "--once", "--addr", agent.base],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert gone.returncode != 0
    assert f"no agent answered at {agent.base}/status" in gone.stderr
