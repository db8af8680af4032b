"""New pods through the runtime hooks on the real kernel (root, cgroup v1): how long from a pod's cgroup
appearing to its hook values written, and how many writes a new pod costs, beside a raw-write floor.

The real agent runs standalone over a kubelet-like test tree with a pod list naming N best-effort pods
with batch resources (batch-cpu 1500 / limit 3000, batch-memory 1Gi: six values per pod, ``cpu.shares``,
``cpu.cfs_quota_us`` and ``memory.limit_in_bytes`` on the pod and its container), listed before their
cgroups exist, as the kubelet lists a pod before it makes its cgroups. The periodic passes are set far
out, so every write is the event path's. Pods are made one after another (pod dir, then container dir, in
every controller, as the kubelet and the runtime do), the next once the last is written:

- cgroup → hooks written: from just before the pod's first ``mkdir`` to the last of its writes in the
  agent's audit log (``/events``, wall clock), p50 and p99;
- writes per new pod: the audit log's writes under the pod's dirs (the guard's re-checks write nothing);
- floor: the same six values written with raw ``write(2)``s into a fresh pod's cgroups.

Koordinator's reconciler writes a new pod at its next pod refresh, up to ``--kubelet-sync-interval``
(10 s) later; ``ratio`` = p99 / that 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from koordlet.api import KubeQOSClass
from koordlet.testing.agent import Agent
from koordlet.testing.cgroups import RealKubepods, unavailable, write_file
from koordlet.testing.wait import wait_until

NAME = "runtimehooks"
GiB = 1 << 30
KOORDINATOR_WAIT = 10.0
WANT = (
    ("cpu", "cpu.shares", "1536"),
    ("cpu", "cpu.cfs_quota_us", "300000"),
    ("memory", "memory.limit_in_bytes", str(GiB)),
)


def pod_item(uid: str, i: int) -> dict[str, Any]:
    batch = {
        "requests": {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": "3000", "kubernetes.io/batch-memory": "1Gi"},
    }
    return {
        "metadata": {
            "uid": uid,
            "name": f"batch-{i}",
            "namespace": "bench",
            "labels": {"koordinator.sh/qosClass": "BE"},
        },
        "spec": {"containers": [{"name": "main", "resources": batch}]},
        "status": {"phase": "Running", "qosClass": "BestEffort"},
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def floor_ms(kp: RealKubepods, rounds: int) -> list[float]:
    """Raw write(2)s of the six values into fresh pod and container cgroups."""
    out = []
    for _ in range(rounds):
        pod = kp.add_pod(KubeQOSClass.BESTEFFORT)
        c = kp.add_container(pod)
        t0 = time.perf_counter()
        for d in (pod.cgroup_dir, c.cgroup_dir):
            for sub, name, value in WANT:
                write_file(kp.path(sub, d, name), value)
        out.append((time.perf_counter() - t0) * 1000)
        kp.remove_pod(pod)
    return out


def run(pods: int) -> dict[str, Any]:
    kp = RealKubepods(prefix="koordlet-bench-hooks")
    tmp = Path(tempfile.mkdtemp(prefix="koordlet-bench-hooks-"))
    uids = [str(uuid.uuid4()) for _ in range(pods)]
    pod_list = tmp / "pods.json"
    pod_list.write_text(
        json.dumps({"kind": "PodList", "items": [pod_item(u, i) for i, u in enumerate(uids)]})
    )
    agent = Agent(
        tmp,
        f"--cgroup-root=/{kp.parent}",
        f"--pod-list={pod_list}",
        "--runtime-hooks-reconcile-interval=3600s",
        "--kubelet-sync-interval=3600s",
        "--audit-max-events-limit=100000",
    )
    latencies: list[float] = []
    writes: list[int] = []
    load = os.getloadavg()[0]
    try:
        agent.wait_ready()
        for uid in uids:
            t0 = time.time()
            pod = kp.add_pod(KubeQOSClass.BESTEFFORT, uid)
            c = kp.add_container(pod)
            dirs = (pod.cgroup_dir, c.cgroup_dir)

            def written(dirs: tuple[str, str] = dirs) -> bool:
                return all(
                    kp.path(sub, d, name).read_text().strip() == value
                    for d in dirs
                    for sub, name, value in WANT
                )

            if not wait_until(written, 30, step=0.002):
                raise AssertionError(f"pod {uid} not written in 30 s:\n{agent.tail()}")

            def events(uid: str = uid) -> list[dict[str, Any]]:
                return [e for e in agent.get("/events?limit=100000")["events"] if uid in str(e["path"])]

            # a write is audited just after it lands: the file can show it a moment before /events does
            wait_until(lambda: len(events()) >= len(WANT) * 2, 2.0, step=0.01)
            found = events()
            latencies.append(max(float(e["time"]) for e in found) - t0)
            writes.append(len(found))
        floor = floor_ms(kp, min(pods, 50))
    finally:
        agent.stop()
        kp.cleanup()
    p99 = percentile(latencies, 99)
    return {
        "bench": NAME,
        "pods": pods,
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 2),
        "latency_p99_ms": round(p99 * 1000, 2),
        "writes_per_pod": round(statistics.mean(writes), 2),
        "writes_per_pod_max": max(writes),
        "floor_p50_ms": round(statistics.median(floor), 3),
        "floor_p99_ms": round(percentile(floor, 99), 3),
        "ratio": round(p99 / KOORDINATOR_WAIT, 4),
        "cpus": os.cpu_count(),
        "loadavg_1m": round(max(load, os.getloadavg()[0]), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20 pods instead of 100")
    parser.add_argument("--pods", type=int, default=100)
    args = parser.parse_args()
    why = unavailable("this benchmark")
    if why:
        print(json.dumps({"bench": NAME, "skipped": why}))
        return
    r = run(20 if args.quick else args.pods)
    print(
        f"{r['pods']} new BE pods: cgroup -> hooks written p50 {r['latency_p50_ms']} ms, "
        f"p99 {r['latency_p99_ms']} ms (Koordinator's reconciler: up to {KOORDINATOR_WAIT:.0f} s)"
    )
    print(
        f"  {r['writes_per_pod']} writes per pod (max {r['writes_per_pod_max']}); the same six values as "
        f"raw write(2)s: p50 {r['floor_p50_ms']} ms, p99 {r['floor_p99_ms']} ms"
    )
    print(f"  ({r['cpus']} CPUs, load average {r['loadavg_1m']}: other work shares this machine)")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
