"""BECPUSuppress's cpuset on a simulated 8-CPU node, driven the way the agent drives it.

The node: logical CPUs 0-7 in hyper-thread sibling pairs (0,1) (2,3) (4,5) (6,7); an LSE pod bound to
CPU 0; LS load around it; a BE pod that uses every CPU its cpuset gives it; other work outside the pods
at 0.1 core with, now and then (0.7-1.3 s apart), a burst of 1.5 cores that lasts one 50 ms window (a
daemon's housekeeping, a collector's sweep). The agent's side: the fast sampler's node and BE figures
every 50 ms (read together, with 0.05-core noise), the 1 s collection (averages of the last second) and
the plugin's 1 s tick half a second after it. Time is the harness's fake clock: 40 simulated seconds run
in well under a second, with no sleeps.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.cpusuppress import BECPUSuppress
from qosplugins.cpusuppress import cpuset as _cpuset

BE = "kubepods/besteffort"
CPUS = [api.CPUInfo(cpu=i, core=i // 2) for i in range(8)]
STEP = 0.05
STEPS_PER_SECOND = 20


@dataclass
class SimNode:
    h: Harness
    plugin: BECPUSuppress
    pods: dict[str, api.PodInfo]
    rng: random.Random
    history: list[tuple[float, float, float]] = field(default_factory=list)
    """``(non-BE pods, BE, node)`` cores of each 50 ms window."""
    seen: list[tuple[float, str]] = field(default_factory=list)
    """``(time, BE cpuset)`` at every change."""
    next_burst: float = 1.0

    def be_cpus(self) -> str:
        return self.h.host.read("cpuset.cpus", BE) or ""

    def run(self, seconds: float, non_be_cores: float) -> None:
        h = self.h
        for _ in range(round(seconds / STEP)):
            h.clock.advance(STEP)
            t = h.clock()
            other = 0.1
            if t >= self.next_burst:
                other += 1.5
                self.next_burst = t + self.rng.uniform(0.7, 1.3)
            pods_non_be = non_be_cores + self.rng.gauss(0.0, 0.05)
            be = float(len(api.parse_cpuset(self.be_cpus())))
            node = pods_non_be + be + other
            self.history.append((pods_non_be, be, node))
            h.metrics.set(api.NODE_CPU_USAGE_FAST, node)
            h.metrics.set(api.BE_CPU_USAGE_FAST, be)
            h.publish(api.EVENT_NODE_SAMPLE)
            step = len(self.history) % STEPS_PER_SECOND
            if step == 0:
                self._collect()
            elif step == STEPS_PER_SECOND // 2:
                self.plugin.reconcile()
            if not self.seen or self.seen[-1][1] != self.be_cpus():
                self.seen.append((round(t, 2), self.be_cpus()))

    def _collect(self) -> None:
        last = self.history[-STEPS_PER_SECOND:]
        non_be, be, node = (sum(x[i] for x in last) / len(last) for i in range(3))
        m = self.h.metrics
        m.set(api.NODE_CPU_USAGE, node)
        m.set(api.POD_CPU_USAGE, 1.0, {"pod_uid": self.pods["lse"].uid})
        m.set(api.POD_CPU_USAGE, non_be - 1.0, {"pod_uid": self.pods["ls"].uid})
        m.set(api.POD_CPU_USAGE, be, {"pod_uid": self.pods["be"].uid})


def sim_node(seed: int) -> SimNode:
    # threshold 70 %: 5600m - (4000m non-BE + other) -> 2 CPUs; - (2000m + other) -> 4 CPUs
    h = make_harness(1, CPUS, node=make_node(8000, 16 << 30), slo=be_slo(cpu_suppress_threshold_percent=70))
    bound = {_cpuset.RESOURCE_STATUS_ANNOTATION: json.dumps({"cpuset": "0"})}
    pods = {
        "lse": h.add_pod(make_pod("lse", api.QOSClass.LSE, annotations=bound)),
        "ls": h.add_pod(make_pod("ls", api.QOSClass.LS, cpu_request_milli=1000)),
        "be": h.add_pod(make_pod("be", api.QOSClass.BE)),
    }
    plugin = BECPUSuppress()
    h.start(plugin)
    return SimNode(h, plugin, pods, random.Random(seed))


def test_be_cpuset_grows_pairs_first_and_stays_when_ls_falls() -> None:
    """Non-BE load falls from 4 to 2 cores: BE grows one CPU a tick, sibling pairs first (Koordinator's
    ``{1,2,3}`` then ``{2,3,4,5}``), and holds for 20 s through the bursts of other work. Before the held rise
    the fast path shrank BE on each one-window burst and the tick grew it back: ``1-3``, ``2-3``, ``1-3``...
    """
    for seed in range(3):
        node = sim_node(seed)
        node.run(10, non_be_cores=4.0)
        assert node.be_cpus() == "2-3", node.seen
        fell_at = node.h.clock()
        node.run(23, non_be_cores=2.0)
        after = [(round(t - fell_at, 2), cpus) for t, cpus in node.seen if t > fell_at]
        assert [cpus for _, cpus in after] == ["1-3", "2-5"], after
        assert after[-1][0] <= 3.0, after  # two ticks after the first with the lower load
