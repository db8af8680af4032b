"""Real pods on the real kernel for end-to-end tests: a kubepods tree under a unique parent in the cgroup v1
controllers, pod and container cgroups named like kubelet's cgroupfs driver, and busy processes inside.

Everything created is removed by :meth:`RealKubepods.cleanup` (processes killed, cgroups removed deepest
first), which the fixture calls even when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from koordlet.api import KubeQOSClass

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "cpuacct", "cpuset", "memory")
TIER = {
    KubeQOSClass.BESTEFFORT: "besteffort",
    KubeQOSClass.BURSTABLE: "burstable",
    KubeQOSClass.GUARANTEED: "",
}

BUSY = """
import os, sys, time
duty = float(sys.argv[1])
period = 0.01
while True:
    end = time.perf_counter() + period * duty
    while time.perf_counter() < end:
        pass
    if duty < 1.0:
        time.sleep(period * (1.0 - duty))
"""

ALLOC = """
import sys, time
chunks = []
step = int(sys.argv[1]) * 1024 * 1024
total = int(sys.argv[2]) * 1024 * 1024
while sum(len(c) for c in chunks) < total:
    chunks.append(bytearray(step))
    for i in range(0, step, 4096):
        chunks[-1][i] = 1
    time.sleep(float(sys.argv[3]))
print("allocated", flush=True)
time.sleep(3600)
"""


@dataclass
class RealContainer:
    pod_uid: str
    container_id: str
    cgroup_dir: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


@dataclass
class RealPod:
    uid: str
    qos: KubeQOSClass
    cgroup_dir: str
    containers: list[RealContainer] = field(default_factory=list)


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class RealKubepods:
    """A kubelet-like cgroupfs tree ``<parent>/kubepods/{besteffort,burstable}`` in each v1 controller."""

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root
        self.parent = f"koordlet-e2e-{uuid.uuid4().hex[:10]}"
        self.pods: list[RealPod] = []
        self._dirs: list[str] = []
        self.kubepods = f"{self.parent}/kubepods"
        for rel in (self.parent, self.kubepods, f"{self.kubepods}/besteffort", f"{self.kubepods}/burstable"):
            self._mkdir(rel)
        # kubelet gives the besteffort tier the minimum weight, burstable the sum of requests.
        _write(self.path("cpu", f"{self.kubepods}/besteffort", "cpu.shares"), "2")

    def path(self, subsystem: str, rel: str, file: str = "") -> Path:
        p = self.root / subsystem / rel
        return p / file if file else p

    def _mkdir(self, rel: str) -> None:
        for sub in SUBSYSTEMS:
            d = self.path(sub, rel)
            d.mkdir(exist_ok=True)
            if sub == "cpuset":
                parent = d.parent
                for f in ("cpuset.cpus", "cpuset.mems"):
                    _write(d / f, (parent / f).read_text().strip() or "0")
        self._dirs.append(rel)

    def add_pod(self, qos: KubeQOSClass, uid: str | None = None) -> RealPod:
        uid = uid or str(uuid.uuid4())
        tier = TIER[qos]
        rel = f"{self.kubepods}/{tier}/pod{uid}" if tier else f"{self.kubepods}/pod{uid}"
        self._mkdir(rel)
        pod = RealPod(uid, qos, rel)
        self.pods.append(pod)
        return pod

    def add_container(self, pod: RealPod, container_id: str | None = None) -> RealContainer:
        cid = container_id or uuid.uuid4().hex + uuid.uuid4().hex
        rel = f"{pod.cgroup_dir}/{cid}"
        self._mkdir(rel)
        container = RealContainer(pod.uid, cid, rel)
        pod.containers.append(container)
        return container

    def spawn(
        self, container: RealContainer, script: str, *args: str, stdin: bool = False
    ) -> subprocess.Popen[bytes]:
        """Start ``python -c script args`` inside the container's cgroups (moved before exec)."""
        files = [self.path(sub, container.cgroup_dir, "cgroup.procs") for sub in SUBSYSTEMS]

        def enter() -> None:
            pid = str(os.getpid())
            for f in files:
                _write(f, pid)

        proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            preexec_fn=enter,  # noqa: PLW1509 - single-threaded enough for a test helper
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        container.procs.append(proc)
        return proc

    def busy(self, container: RealContainer, duty: float = 1.0) -> subprocess.Popen[bytes]:
        return self.spawn(container, BUSY, str(duty))

    def cpu_usage_ns(self, rel: str) -> int | None:
        try:
            return int(self.path("cpuacct", rel, "cpuacct.usage").read_text())
        except OSError:
            return None

    def cpu_rate(self, rel: str, seconds: float) -> float:
        """Cores used by ``rel`` over the next ``seconds``."""
        a, t0 = self.cpu_usage_ns(rel), time.monotonic()
        time.sleep(seconds)
        b, t1 = self.cpu_usage_ns(rel), time.monotonic()
        if a is None or b is None:
            return 0.0
        return (b - a) / 1e9 / (t1 - t0)

    def stop_container(self, container: RealContainer) -> None:
        for proc in container.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(5)
        container.procs.clear()

    def cleanup(self) -> None:
        for pod in self.pods:
            for c in pod.containers:
                self.stop_container(c)
        for rel in sorted(self._dirs, key=lambda r: r.count("/"), reverse=True):
            for sub in SUBSYSTEMS:
                d = self.path(sub, rel)
                for _ in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.05)  # processes still exiting
        self._dirs.clear()
