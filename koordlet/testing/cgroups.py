"""Real cgroups and processes on the real kernel, for tests and benchmarks (root and cgroup v1 or v2).

:class:`RealCgroupTree` makes cgroups under a unique parent in the controllers it is given (or in a cgroup2
mount), starts processes inside them and removes everything it made, deepest first, on :meth:`cleanup`
(also as a context manager). :class:`RealKubepods` is a kubelet-like ``<parent>/kubepods`` tree on top of
it, with pods and containers named as the cgroupfs driver names them and busy processes as their load.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from koordlet.api import KubeQOSClass, PodInfo
from koordlet.testing.builders import make_pod
from koordlet.testing.wait import wait_until

CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")
TIER = {
    KubeQOSClass.BESTEFFORT: "besteffort",
    KubeQOSClass.BURSTABLE: "burstable",
    KubeQOSClass.GUARANTEED: "",
}

BUSY = """
import os, sys, time
duty = float(sys.argv[1])
period = 0.01
print("ready", flush=True)
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

    def info(self) -> PodInfo:
        """The pod as the states informer would list it (cgroupfs container IDs carry no runtime)."""
        ids = [c.container_id for c in self.containers]
        return make_pod(
            uid=self.uid, kube_qos=self.qos, cgroup_dir=self.cgroup_dir, container_ids=ids, runtime=""
        )


def write_file(path: Path, value: str) -> None:
    """One unbuffered ``write(2)``, as the kernel wants cgroup values (raises what the kernel refuses)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class RealCgroupTree:
    """Cgroups under ``<root>/<controller>/<parent>`` for each v1 controller, or under ``<root>/<parent>``
    when ``controllers`` is ``("",)`` (a cgroup2 mount). New v1 cpusets inherit their parent's CPUs and
    memory nodes, since an empty cpuset takes no tasks."""

    def __init__(
        self, controllers: Sequence[str], *, root: Path = CGROUP_ROOT, parent: str | None = None
    ) -> None:
        self.root = root
        self.controllers = tuple(controllers)
        self.parent = parent or f"koordlet-test-{uuid.uuid4().hex[:10]}"
        self.made: list[Path] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.mkdir("")

    def path(self, controller: str, rel: str = "", file: str = "") -> Path:
        """``rel`` (relative to the parent) in ``controller``; ``file`` inside it."""
        cg = f"{self.parent}/{rel}" if rel else self.parent
        p = self.root / controller / cg if controller else self.root / cg
        return p / file if file else p

    def cgroup_dir(self, rel: str = "") -> str:
        """``rel`` as a cgroup dir relative to a controller root (what the agent names cgroups by)."""
        return f"{self.parent}/{rel}" if rel else self.parent

    def mkdir(self, rel: str) -> str:
        """Create ``rel`` and its missing ancestors in every controller; returns its cgroup dir."""
        for ctl in self.controllers:
            parts = [p for p in self.cgroup_dir(rel).split("/") if p]
            for i in range(1, len(parts) + 1):
                d = (self.root / ctl if ctl else self.root).joinpath(*parts[:i])
                if d.exists():
                    continue
                d.mkdir()
                self.made.append(d)
                if ctl == "cpuset":
                    for name in ("cpuset.cpus", "cpuset.mems"):
                        write_file(d / name, (d.parent / name).read_text().strip() or "0")
        return self.cgroup_dir(rel)

    def spawn(self, rel: str, argv: Sequence[str], *, stdin: bool = False) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``rel`` in every controller (moved there before it execs)."""
        files = [self.path(ctl, rel, "cgroup.procs") for ctl in self.controllers]

        def enter() -> None:
            pid = str(os.getpid())
            for f in files:
                write_file(f, pid)

        proc = subprocess.Popen(
            list(argv),
            preexec_fn=enter,  # noqa: PLW1509 - single-threaded enough for a test helper
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    def python(self, rel: str, script: str, *args: str, stdin: bool = False) -> subprocess.Popen[bytes]:
        """``python -c script args`` inside ``rel``."""
        return self.spawn(rel, [sys.executable, "-c", script, *args], stdin=stdin)

    def kill(self, procs: Sequence[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(5)

    def cleanup(self) -> None:
        """Kill the processes started here and any other task left in these cgroups (the parent is this
        tree's own), then remove every cgroup made here, deepest first."""
        self.kill(self.procs)
        self.procs.clear()
        for d in sorted(self.made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            wait_until(functools.partial(_rmdir, d), 5.0, step=0.02)  # killed tasks leave asynchronously
        self.made.clear()

    def __enter__(self) -> RealCgroupTree:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()


def _rmdir(d: Path) -> bool:
    """True once ``d`` is gone; False while the kernel still holds it busy."""
    try:
        d.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def unavailable(what: str, root: Path = CGROUP_ROOT) -> str:
    """Why :class:`RealKubepods` cannot be made here (empty: it can); ``what`` names the caller in the
    sentence (``"the loop"``, ``"the demo"``)."""
    if os.geteuid() != 0:
        return f"{what} makes real cgroups and moves processes into them: run it as root"
    missing = [c for c in KUBEPODS_CONTROLLERS if not (root / c / "cgroup.procs").exists()]
    if missing:
        return f"{what} needs cgroup v1 with the {', '.join(missing)} controller(s) mounted under {root}"
    return ""


class RealKubepods:
    """A kubelet-like cgroupfs tree ``<parent>/kubepods/{besteffort,burstable}`` in each v1 controller."""

    def __init__(
        self,
        root: Path = CGROUP_ROOT,
        controllers: Sequence[str] = KUBEPODS_CONTROLLERS,
        *,
        prefix: str = "koordlet-e2e",
    ) -> None:
        """``controllers``: the v1 controllers the tree (and every process spawned in it) spans; add
        ``blkio`` or ``perf_event`` where a test needs them. ``prefix`` starts the parent's name."""
        parent = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.tree = RealCgroupTree(controllers, root=root, parent=parent)
        self.root = root
        self.parent = self.tree.parent
        self.pods: list[RealPod] = []
        self.kubepods = f"{self.parent}/kubepods"
        for tier in ("besteffort", "burstable"):
            self.tree.mkdir(f"kubepods/{tier}")
        # kubelet gives the besteffort tier the minimum weight, burstable the sum of requests.
        write_file(self.tree.path("cpu", "kubepods/besteffort", "cpu.shares"), "2")

    def path(self, subsystem: str, rel: str, file: str = "") -> Path:
        """``rel`` is a cgroup dir (relative to the controller root), as pods and containers carry."""
        p = self.root / subsystem / rel
        return p / file if file else p

    def _rel(self, cgroup_dir: str) -> str:
        return cgroup_dir[len(self.parent) + 1 :]

    def add_pod(self, qos: KubeQOSClass, uid: str | None = None) -> RealPod:
        uid = uid or str(uuid.uuid4())
        tier = TIER[qos]
        rel = f"kubepods/{tier}/pod{uid}" if tier else f"kubepods/pod{uid}"
        pod = RealPod(uid, qos, self.tree.mkdir(rel))
        self.pods.append(pod)
        return pod

    def add_container(self, pod: RealPod, container_id: str | None = None) -> RealContainer:
        cid = container_id or uuid.uuid4().hex + uuid.uuid4().hex
        container = RealContainer(pod.uid, cid, self.tree.mkdir(f"{self._rel(pod.cgroup_dir)}/{cid}"))
        pod.containers.append(container)
        return container

    def spawn(
        self, container: RealContainer, script: str, *args: str, stdin: bool = False
    ) -> subprocess.Popen[bytes]:
        """Start ``python -c script args`` inside the container's cgroups (moved before exec)."""
        proc = self.tree.python(self._rel(container.cgroup_dir), script, *args, stdin=stdin)
        container.procs.append(proc)
        return proc

    def busy(self, container: RealContainer, duty: float = 1.0) -> subprocess.Popen[bytes]:
        """A process burning ``duty`` of a core in the container; returns once it is in its loop (past
        the interpreter's start-up), so a test measures the duty cycle and nothing else."""
        proc = self.spawn(container, BUSY, str(duty))
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise AssertionError(f"busy process {proc.pid} exited before its loop ({proc.poll()})")
        return proc

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
        self.tree.kill(container.procs)
        container.procs.clear()

    def remove_container(self, container: RealContainer) -> None:
        """Stop the container's processes and remove its cgroups now, as the runtime does when it exits."""
        self.stop_container(container)
        self._rmdir_now(container.cgroup_dir)

    def remove_pod(self, pod: RealPod) -> None:
        """Stop the pod's processes and remove its cgroups now, as the kubelet does when a pod goes."""
        for c in pod.containers:
            self.remove_container(c)
        self._rmdir_now(pod.cgroup_dir)
        self.pods.remove(pod)

    def _rmdir_now(self, cgroup_dir: str) -> None:
        for ctl in self.tree.controllers:
            d = self.path(ctl, cgroup_dir)
            if not wait_until(functools.partial(_rmdir, d), 5.0, step=0.02):
                raise AssertionError(f"could not remove {d}")
            if d in self.tree.made:
                self.tree.made.remove(d)

    def cleanup(self) -> None:
        self.tree.cleanup()
