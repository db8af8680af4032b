"""The loop's node-scheduler scenario (``make loop`` runs it after the colocation one; ``python -m
tests.loop --scenario numa`` alone): koord-scheduler's NodeNUMAResource and the agent's runtime hooks
meeting on this machine's real kernel.

1. The test API server, one process kubelet (node ``loop-numa``), koord-scheduler with NodeNUMAResource
   in its profile, and a koordlet whose sysfs is a simulated topology written over this host's CPUs: one
   socket, two NUMA nodes of one core each (CPUs 0 and 1, the two this machine has, so the cpusets
   decided on it are ones the real kernel takes). Its NodeResourceTopology appears.
2. An LSR pod (one CPU, prod) is placed by koord-scheduler on a whole core of one NUMA node
   (``resource-status``), and the agent pins its real container cgroup there and lifts its CFS quota;
   its busy process's allowed CPUs follow.
3. An LS pod lands on the shared pool: the CPU the LSR pod does not hold.
4. A BE pod asking for batch resources (``kubernetes.io/batch-cpu`` 1500 / limit 3000,
   ``kubernetes.io/batch-memory`` 1Gi) gets them as its real pod and container cgroup limits: shares 1536,
   quota 300000, memory limit 1 GiB.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordlet.testing.cgroups import write_file
from koordlet.testing.sysfs import write_topology
from koordshared.apis.extension.numa import resource_status
from koordshared.kube.client import ApiError, make_api_client, request
from koordshared.testing.topology import GiB, SimulatedTopology
from tests.cluster.processkubelet import ProcessKubelet
from tests.loop import configs
from tests.loop.components import Child, Component, agent, api_server, stop_all, wait_for, write

NODE = "loop-numa"
TOPOLOGY = SimulatedTopology(
    sockets=1, numa_per_socket=2, cores_per_numa=1, threads=1, memory_per_numa=2 * GiB
)
NRT_PATH = f"/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies/{NODE}"
BATCH = {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"}
BATCH_LIMITS = {"kubernetes.io/batch-cpu": "3000", "kubernetes.io/batch-memory": "1Gi"}
WANT_BE = {"cpu.shares": 1536, "cpu.cfs_quota_us": 300000, "memory.limit_in_bytes": GiB}


@dataclass
class NumaReport:
    nrt_cpus: str = ""
    lsr_cpuset: str = ""
    lsr_cgroup: dict[str, str] = field(default_factory=dict)
    """Container cgroup -> (cpuset.cpus, cpu.cfs_quota_us) as read from the kernel."""
    lsr_quota: dict[str, int] = field(default_factory=dict)
    lsr_allowed: str = ""
    """The busy process's ``Cpus_allowed_list`` (/proc/<pid>/status)."""
    ls_cgroup: dict[str, str] = field(default_factory=dict)
    be_values: dict[str, dict[str, int]] = field(default_factory=dict)
    """cgroup (pod, container) -> file -> value."""
    pin_seconds: float = 0.0
    """From the LSR pod's processes starting to its cgroup pinned."""
    exit_codes: dict[str, int] = field(default_factory=dict)


def scheduler_config() -> dict[str, Any]:
    """koord-scheduler's profile: kube-scheduler's default plugins plus NodeNUMAResource at its defaults."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"resourceName": configs.SCHEDULER, "resourceNamespace": configs.NS},
        "profiles": [
            {
                "schedulerName": configs.SCHEDULER,
                "plugins": {"multiPoint": {"enabled": [{"name": "NodeNUMAResource"}]}},
            }
        ],
    }


def _pod(
    name: str, qos: str, priority_class: str, *, busy: str = "0", resources: dict[str, Any], node: str = ""
) -> dict[str, Any]:
    p = configs.pod(name, busy=busy, priority_class=priority_class, qos=qos, node=node)
    p["spec"]["containers"][0]["resources"] = resources
    return p


def problems(report: NumaReport | None) -> list[str]:
    """What the scenario did not show (empty: everything)."""
    if report is None:
        return ["the scenario did not finish"]
    out = []
    if report.nrt_cpus != "0-1":
        out.append(f"the NodeResourceTopology reported CPUs {report.nrt_cpus!r}, want 0-1")
    if report.lsr_cpuset not in ("0", "1"):
        out.append(f"the LSR pod's resource-status cpuset is {report.lsr_cpuset!r}, want one whole core")
    if not report.lsr_cgroup or set(report.lsr_cgroup.values()) != {report.lsr_cpuset}:
        out.append(f"the LSR containers' cpuset.cpus {report.lsr_cgroup} != {report.lsr_cpuset!r}")
    if not report.lsr_quota or set(report.lsr_quota.values()) != {-1}:
        out.append(f"the LSR cgroups' cfs quota {report.lsr_quota}, want -1")
    if report.lsr_allowed != report.lsr_cpuset:
        out.append(f"the LSR process may run on {report.lsr_allowed!r}, not {report.lsr_cpuset!r}")
    pool = {"0": "1", "1": "0"}.get(report.lsr_cpuset, "?")
    if not report.ls_cgroup or set(report.ls_cgroup.values()) != {pool}:
        out.append(f"the LS containers' cpuset.cpus {report.ls_cgroup}, want the shared pool {pool!r}")
    for cgroup, values in report.be_values.items():
        if values != WANT_BE:
            out.append(f"BE cgroup {cgroup}: {values}, want {WANT_BE}")
    if len(report.be_values) < 2:
        out.append(f"BE cgroups read: {sorted(report.be_values)} (want the pod's and its container's)")
    out += [f"{name} exited with {code}" for name, code in report.exit_codes.items() if code not in (0, -15)]
    return out


def summary(report: NumaReport) -> str:
    return (
        f"NUMA loop: LSR pod on CPU {report.lsr_cpuset} (cgroup pinned {report.pin_seconds:.2f}s after its "
        f"processes started, quota -1), LS pod on the shared pool {sorted(set(report.ls_cgroup.values()))}, "
        f"BE pod cgroups {sorted(report.be_values.values(), key=str)[:1]}"
    )


class NumaLoop:
    def __init__(self, work: Path, say: Callable[[str, str], None]) -> None:
        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.say = say
        self.stop = threading.Event()
        self.procs: list[Child] = []
        self.kubelet: ProcessKubelet | None = None
        self.report = NumaReport()
        self.api: Any = None

    def _follow(self, name: str, line: str) -> None:
        if "Successfully assigned" in line or "unable to schedule" in line:
            self.say(name, line.split("] ", 1)[-1])

    def run(self) -> NumaReport:
        apiserver, kubeconfig = api_server(self.work, self.logs)
        self.procs.append(apiserver)
        self.say("api-server", apiserver.first_line)
        self.api = make_api_client(kubeconfig=str(kubeconfig))
        request(self.api, "namespace", "POST", "/api/v1/namespaces", body={"metadata": {"name": configs.NS}})
        k = self.kubelet = ProcessKubelet(
            self.api,
            NODE,
            self.work,
            cpu=configs.CPU,
            memory=configs.MEMORY,
            on_event=lambda m: self.say(f"kubelet {NODE}", m),
        )
        k.start(self.stop)
        host = write_topology(self.work / "host", TOPOLOGY)
        self.say(
            "loop", f"simulated topology for {NODE}'s agent: 1 socket, 2 NUMA nodes of one core (CPUs 0, 1)"
        )
        scheduler = Component(
            configs.SCHEDULER,
            "koord.scheduler",
            [
                f"--kubeconfig={kubeconfig}",
                f"--config={write(self.work / 'numa-scheduler.yaml', scheduler_config())}",
            ],
            self.logs,
            follow=self._follow,
        )
        koordlet = agent(
            NODE,
            kubeconfig,
            self.work,
            cgroup_parent=k.cgroup_parent,
            proc_root=k.proc_root,
            kubelet_port=k.port,
            extra=[
                f"--sys-root-dir={host.sys_root}",
                f"--var-lib-kubelet-dir={host.var_lib_kubelet}",
                "--disable-query-kubelet-config",  # the process kubelet has no /configz
                "--node-topology-sync-interval=1s",
            ],
        )
        self.procs += [scheduler.proc, koordlet]
        for c in (scheduler, koordlet):
            wait_for(f"{c.name} ready", c.ready, 60, [c.proc if isinstance(c, Component) else c])
            self.say(c.name, "ready")
        wait_for(f"{NODE}'s NodeResourceTopology", self._nrt, 60, self.procs)
        self._lsr()
        self._ls()
        self._be()
        return self.report

    def _nrt(self) -> bool:
        try:
            obj = request(self.api, "get nrt", "GET", NRT_PATH, timeout=5)
        except ApiError:
            return False
        notes = obj["metadata"].get("annotations") or {}
        detail = json.loads(notes.get("node.koordinator.sh/cpu-topology") or "{}").get("detail") or []
        self.report.nrt_cpus = ",".join(str(c["id"]) for c in detail).replace("0,1", "0-1")
        zones = [z["name"] for z in obj.get("zones") or []]
        self.say(
            f"koordlet-{NODE}",
            f"reported its NodeResourceTopology: CPUs {self.report.nrt_cpus}, zones {zones}",
        )
        return True

    def _create(self, pod: dict[str, Any]) -> None:
        request(self.api, "create pod", "POST", "/api/v1/namespaces/default/pods", body=pod)

    def _get(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = request(
            self.api, "get pod", "GET", f"/api/v1/namespaces/default/pods/{name}", timeout=5
        )
        return got

    def _running(self, name: str) -> Any:
        """The kubelet's record of the pod once it runs it (its real cgroups exist)."""
        assert self.kubelet is not None
        uid = self._get(name)["metadata"]["uid"]
        return self.kubelet.running.get(uid)

    def kubelet_path(self, controller: str, cgroup_dir: str, file: str) -> Path:
        assert self.kubelet is not None
        return self.kubelet.kubepods.path(controller, cgroup_dir, file)

    def _read(self, controller: str, cgroup_dir: str, file: str) -> str:
        return self.kubelet_path(controller, cgroup_dir, file).read_text().strip()

    def _lsr(self) -> None:
        one = {"cpu": "1", "memory": "256Mi"}
        self._create(
            _pod("lsr", "LSR", "koord-prod", busy="300m", resources={"requests": one, "limits": one})
        )
        wait_for("the LSR pod running", lambda: self._running("lsr"), 30, self.procs)
        started = time.monotonic()
        status = resource_status(self._get("lsr")["metadata"].get("annotations") or {})
        self.report.lsr_cpuset = status.cpuset
        self.say(configs.SCHEDULER, f"default/lsr -> {NODE}, resource-status cpuset {status.cpuset!r}")
        real = self._running("lsr").real
        # the process kubelet sets no limits: write the CFS quota a kubelet gives a Guaranteed pod of one
        # CPU, which the agent lifts (at once, or as a value changed by hand if it was first)
        for d in [real.cgroup_dir, *(c.cgroup_dir for c in real.containers)]:
            write_file(self.kubelet_path("cpu", d, "cpu.cfs_quota_us"), "100000")

        def pinned() -> bool:
            cpus = {c.cgroup_dir: self._read("cpuset", c.cgroup_dir, "cpuset.cpus") for c in real.containers}
            quota = {d: int(self._read("cpu", d, "cpu.cfs_quota_us")) for d in [real.cgroup_dir, *cpus]}
            self.report.lsr_cgroup, self.report.lsr_quota = cpus, quota
            return set(cpus.values()) == {status.cpuset} and set(quota.values()) == {-1}

        wait_for("the agent pinning the LSR containers", pinned, 30, self.procs)
        self.report.pin_seconds = time.monotonic() - started
        pid = real.containers[0].procs[0].pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                self.report.lsr_allowed = line.split(":", 1)[1].strip()
        self.say(
            f"koordlet-{NODE}",
            f"pinned default/lsr: cpuset.cpus {status.cpuset}, cfs quota -1 "
            f"({self.report.pin_seconds:.2f}s); its process may run on CPU {self.report.lsr_allowed}",
        )

    def _ls(self) -> None:
        small = {"cpu": "100m", "memory": "64Mi"}
        self._create(_pod("ls", "LS", "koord-prod", resources={"requests": small}))
        wait_for("the LS pod running", lambda: self._running("ls"), 30, self.procs)
        real = self._running("ls").real
        pool = {"0": "1", "1": "0"}.get(self.report.lsr_cpuset, "")

        def shared() -> bool:
            self.report.ls_cgroup = {
                c.cgroup_dir: self._read("cpuset", c.cgroup_dir, "cpuset.cpus") for c in real.containers
            }
            return set(self.report.ls_cgroup.values()) == {pool}

        wait_for("the LS pod on the shared pool", shared, 30, self.procs)
        self.say(f"koordlet-{NODE}", f"default/ls on the shared pool: cpuset.cpus {pool}")

    def _be(self) -> None:
        resources = {"requests": BATCH, "limits": BATCH_LIMITS}
        self._create(_pod("be", "BE", "koord-batch", resources=resources, node=NODE))
        wait_for("the BE pod running", lambda: self._running("be"), 30, self.procs)
        real = self._running("be").real
        files = (("cpu", "cpu.shares"), ("cpu", "cpu.cfs_quota_us"), ("memory", "memory.limit_in_bytes"))

        def limited() -> bool:
            for d in [real.cgroup_dir, *(c.cgroup_dir for c in real.containers)]:
                self.report.be_values[d] = {f: int(self._read(ctl, d, f)) for ctl, f in files}
            return all(v == WANT_BE for v in self.report.be_values.values())

        wait_for("the BE pod's batch resources as cgroup limits", limited, 30, self.procs)
        self.say(
            f"koordlet-{NODE}",
            "default/be (batch-cpu 1500/3000, batch-memory 1Gi): cpu.shares 1536, cfs quota 300000, "
            "memory limit 1Gi on the pod and its container",
        )

    def close(self) -> None:
        self.stop.set()
        stop_all(self.procs, [self.kubelet] if self.kubelet else [], self.api, self.report.exit_codes)


def run(work: Path, say: Callable[[str, str], None]) -> NumaReport:
    loop = NumaLoop(work, say)
    try:
        return loop.run()
    finally:
        loop.close()
