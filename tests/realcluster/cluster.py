"""A real single-node cluster on this machine: etcd, kube-apiserver, kube-controller-manager, containerd
and a kubelet registering a Ready node, then our stack (:mod:`tests.realcluster.stack`) on it.

Everything lives under one state directory, which records each process started (PID and start time),
the ports and what the machine lacked before the start; :meth:`Cluster.down` reads it back, so a stop from
another process (``make cluster-stop``) ends exactly what the start made and removes every mount, cgroup
and network device it left.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordlet.testing.agent import http_get
from koordlet.testing.cgroups import unavailable
from tests.realcluster import binaries, control, images, node, owner, pki, stack
from tests.realcluster.procs import Started, last_port, wait_until

NODE = "koord-node-0"
TOOLS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "ip",
    "openssl",
    "kubectl",
    "busybox",
    "umount",
)
Say = Callable[[str], None]
_BUILT_IN = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet"}


def free_port() -> int:
    # kube-apiserver and etcd take a port number, not an open socket: a race with another process taking the
    # port between this close and their bind is possible, and shows as a failed start naming the port.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unmet() -> str:
    """What this machine lacks to run the real cluster at all (empty: nothing); the message names the
    system tool or root, as the suite's other gates do."""
    if os.geteuid() != 0:
        return "needs root (the real cluster runs a kubelet and containerd)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not binaries.expected().complete() and shutil.which("go") is None:
        missing.append("go")
    if missing:
        return f"needs the system tool {missing[0]!r} (the real cluster needs {', '.join(missing)})"
    return ""


def preflight(state: Path) -> str:
    """Why this machine cannot run the real cluster in ``state`` (empty: it can)."""
    why = unavailable("the real cluster")
    if why:
        return why
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return (
            f"the real cluster needs {', '.join(missing)}: apt-get install containerd runc "
            "containernetworking-plugins busybox-static iproute2 openssl kubernetes-client"
        )
    if not (node.CNI_BIN / "bridge").exists():
        return f"no CNI plugins in {node.CNI_BIN}: apt-get install containernetworking-plugins"
    if node.kubepods_dirs():
        return "a kubepods cgroup already exists (another kubelet, or a cluster not stopped): stop it first"
    if node.mounts_under(state):
        return f"mounts remain under {state} from an earlier run: run the stop (make cluster-stop) first"
    if node.POD_BRIDGE in node.links():
        return f"network device {node.POD_BRIDGE} exists: a real cluster runs (stop it first)"
    return ""


def reclaim(say: Say = print) -> list[str]:
    """Take down what a killed run left on the node (its bridge, ``kubepods`` cgroups and the kubelet's
    mounts) when nothing of that run still lives; what was done, one line each (empty: nothing to do,
    or a live cluster or kubelet holds the node and :func:`preflight` says so).

    The owner record names the run: its state's own stop undoes everything it recorded (shared mounts,
    host directories it made). Without a readable record (the state deleted with its temporary folder, or
    a kubelet that is not ours) the leftovers are taken only when no kubelet runs and no process is left
    in the ``kubepods`` cgroups: empty cgroups and a bridge named for this project are nobody's."""
    rec = owner.recorded()
    done: list[str] = []
    if rec is not None:
        past = Cluster.load(rec.state) if (rec.state / "cluster.json").exists() else None
        if rec.starter_alive() or (past is not None and any(p.running() for p in past.procs.values())):
            return []
        if past is not None:
            say(f"the cluster in {rec.state} ended without its stop (killed): stopping what it left")
            done += [f"left behind: {line}" for line in past.down(say=say)]
            done.append(f"stopped the cluster recorded in {rec.state}")
        owner.release(rec.state)
    if node.kubelet_running() or any(node.alive(p) for p in node.kubepods_tasks()):
        return done
    bridge = [node.POD_BRIDGE] if node.POD_BRIDGE in node.links() else []
    found = [*map(str, node.kubepods_dirs()), *bridge, *node.mounts_under(node.KUBELET_ROOT)]
    if found:
        done.append(f"took down {', '.join(found)}")
        done += [f"could not take down {line}" for line in node.clear(node.KUBELET_ROOT)]
    for line in done:
        say(f"reclaimed a killed run's node: {line}")
    return done


def ready(state: Path, say: Say = print) -> str:
    """Why this machine cannot run a full cluster in ``state`` now (empty: it can), once what a killed
    run left is taken down: the machine lock's question while it waits."""
    reclaim(say)
    return preflight(state)


@dataclass
class Cluster:
    state: Path
    node_name: str = NODE
    procs: dict[str, Started] = field(default_factory=dict)
    ports: control.Ports | None = None
    absent_at_start: list[str] = field(default_factory=list)
    version: str = ""
    with_node: bool = True
    """A kubelet, containerd and the node's devices (one such cluster per machine)."""
    made_shared: list[str] = field(default_factory=list)
    """Mounts the start made shared (the stop makes them private again)."""
    owned: list[str] = field(default_factory=list)
    """Machine-wide things this cluster made and its stop removes (``node``: the bridge, the kubepods
    cgroups, the kubelet's and the runtime's host directories)."""
    controller_flags: tuple[str, ...] = ()
    """Extra kube-controller-manager flags (a benchmark without heartbeats turns node lifecycle off)."""
    audit_policy: dict[str, Any] | None = None
    """kube-apiserver's audit policy (default: :data:`control.AUDIT_POLICY`, pod writes only)."""

    # -- layout

    @property
    def pki(self) -> Path:
        return self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state / "admin.kubeconfig"

    @property
    def net(self) -> control.Network:
        return node.NETWORK if self.with_node else control.LOOPBACK

    @property
    def server(self) -> str:
        assert self.ports is not None
        return f"https://{self.net.api_host}:{self.ports.apiserver}"

    def _record(self) -> None:
        doc = {
            "node": self.node_name,
            "withNode": self.with_node,
            "owned": self.owned,
            "madeShared": self.made_shared,
            "version": self.version,
            "ports": self.ports.to_json() if self.ports else None,
            "absentAtStart": self.absent_at_start,
            "processes": [p.to_json() for p in self.procs.values()],
        }
        (self.state / "cluster.json").write_text(json.dumps(doc, indent=2))

    @classmethod
    def load(cls, state: Path) -> Cluster:
        doc = json.loads((state / "cluster.json").read_text())
        ports = control.Ports(**doc["ports"]) if doc.get("ports") else None
        procs = {p["name"]: Started.from_json(p) for p in doc.get("processes", [])}
        absent = list(doc.get("absentAtStart", []))
        with_node = bool(doc.get("withNode", True))
        owned = list(doc.get("owned", []))
        shared = list(doc.get("madeShared", []))
        return cls(state, doc["node"], procs, ports, absent, doc.get("version", ""), with_node, shared, owned)

    def _add(self, p: Started) -> Started:
        self.procs[p.name] = p
        self._record()
        return p

    def adopt(self, p: Started) -> Started:
        """Record a process the caller started against this cluster: :meth:`down` stops it first."""
        return self._add(p)

    # -- start

    def up(self, *, say: Say = print, with_stack: bool = True, with_scheduler: bool = True) -> None:
        """Bring the cluster up (and our stack on it); on a failure, stop what was started and raise.
        Without a node (``with_node`` false) it is etcd, kube-apiserver and kube-controller-manager only:
        nothing machine-wide, so several may run beside a full one (the scheduler benchmarks' hollow
        clusters)."""
        if self.with_node:
            reclaim(say)
        why = preflight(self.state) if self.with_node else ""
        if why:
            raise RuntimeError(why)
        started = time.monotonic()

        def step(text: str) -> None:
            say(f"[{time.monotonic() - started:5.1f}s] {text}")

        bins = binaries.build(say=say)
        self.version = bins.version
        # A fresh start: etcd's data, the node's state and the logs of a previous run would all mislead.
        shutil.rmtree(self.state, ignore_errors=True)
        self.state.mkdir(parents=True)
        if self.with_node:
            self.absent_at_start = [str(p) for p in node.HOST_LEFTOVERS if not p.exists()]
        free = [free_port() for _ in range(7)]
        if self.with_node:
            free[2] = node.API_PORT  # the kubernetes Service's port, for pods' in-cluster configuration
        self.ports = control.Ports(*free)
        self._record()
        try:
            self._up(bins, step, with_stack=with_stack and self.with_node, with_scheduler=with_scheduler)
        except BaseException:
            step("start failed: stopping what was started")
            self.down(say=say)
            raise
        what = f"node {self.node_name} Ready" if self.with_node else "control plane ready (no node)"
        step(f"ready: {what}, Kubernetes {bins.version}")

    def _up(self, bins: binaries.Binaries, step: Say, *, with_stack: bool, with_scheduler: bool) -> None:
        assert self.ports is not None
        step("certificates")
        pki.make_all(self.pki, node=self.node_name, node_ip=node.NODE_IP, service_ip=self.net.service_ip)
        ca = self.pki / "ca.crt"
        kubeconfigs = {}
        for name, cert in (
            ("admin", "admin"),
            ("controller-manager", "controller-manager"),
            ("scheduler", "scheduler"),
            ("kubelet", "kubelet-client"),
        ):
            path = self.state / f"{name}.kubeconfig"
            control.write_kubeconfig(
                path, self.server, ca, user=name, cert=self.pki / f"{cert}.crt", key=self.pki / f"{cert}.key"
            )
            kubeconfigs[name] = path
        if self.with_node:
            owner.claim(self.state)
            self.owned.append("node")
            self._record()
            node.add_node_address()
            self.made_shared = node.make_shared()
            self._record()
        step(f"etcd {bins.version}")
        self._add(control.start_etcd(bins, self.state / "etcd", self.logs, self.ports))
        step("kube-apiserver")
        self._add(
            control.start_apiserver(
                bins,
                self.pki,
                self.state,
                self.logs,
                self.ports,
                node_ip=node.NODE_IP,
                net=self.net,
                audit_policy=self.audit_policy,
            )
        )
        step("kube-controller-manager")
        self._add(
            control.start_controller_manager(
                bins,
                self.pki,
                kubeconfigs["controller-manager"],
                self.logs,
                self.ports,
                self.net,
                extra=self.controller_flags,
            )
        )
        if with_scheduler:
            step("kube-scheduler")
            self._add(
                control.start_scheduler(bins, kubeconfigs["scheduler"], self.state, self.logs, self.ports)
            )
        if not self.with_node:
            return
        step("containerd, images")
        node.write_cni(self.state / "cni" / "net.d", self.state / "cni" / "ipam")
        self._add(node.start_containerd(self.state, self.logs))
        node.import_images(self.state, images.write_archive(self.state / "images.tar"))
        step("kubelet")
        kubelet = self._add(
            node.start_kubelet(
                bins, self.state, self.pki, kubeconfigs["kubelet"], self.logs, self.ports, self.node_name
            )
        )
        wait_until(f"node {self.node_name} Ready", self.node_ready, 120, watch=[kubelet])
        wait_until(
            "the default ServiceAccount",
            lambda: self.kubectl("get", "serviceaccount", "default", "-o", "name"),
            60,
        )
        if with_stack:
            self.start_stack(step)

    def start_stack(self, step: Say) -> None:
        step("deploy/: CRDs, RBAC, ServiceAccounts, ConfigMaps, NodeSLO")
        stack.apply_deploy(self.admin_kubeconfig, self.node_name)
        host_paths = {"/var/run/": self.state / "host" / "var-run"}
        for p in host_paths.values():
            p.mkdir(parents=True, exist_ok=True)
        work = self.state / "stack"
        for run in stack.runs(work, self.node_name, host_paths):
            step(f"{run.name} (as its pod would run it, token of ServiceAccount {run.service_account})")
            running = stack.start(
                run,
                work=work,
                logs=self.logs,
                admin=self.admin_kubeconfig,
                server=self.server,
                ca=self.pki / "ca.crt",
            )
            self._add(running.proc)
        for name in [n for n in self.procs if n.startswith(("koord", "koordlet"))]:
            proc = self.procs[name]
            wait_until(f"{name} ready", functools.partial(self.ready, proc), 90, watch=[proc])

    def restart(
        self, name: str, *, ready: Callable[[], object] | None = None, timeout: float = 120
    ) -> Started:
        """Stop process ``name`` and start it again with the same command; wait for ``ready`` (by
        default: kube-apiserver's /readyz for it, /readyz on its logged port for ours)."""
        old = self.procs[name]
        old.stop()
        log_size = Path(old.log).stat().st_size
        new = self._add(old.again())

        def ours() -> bool:
            return last_port(new, after=log_size) is not None and self.ready(new)

        if ready is None and name == "kube-apiserver":
            ready = self.apiserver_ready
        elif ready is None and name.startswith("koord"):
            ready = ours
        if ready is not None:
            wait_until(f"{name} ready again", ready, timeout, watch=[new])
        return new

    def apiserver_ready(self) -> bool:
        return (
            control.https_get(
                f"{self.server}/readyz", self.pki / "ca.crt", self.pki / "admin.crt", self.pki / "admin.key"
            )[0]
            == 200
        )

    # -- inspect

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        return stack.kubectl(self.admin_kubeconfig, *args, stdin=stdin, timeout=timeout)

    def node_ready(self) -> bool:
        doc = json.loads(self.kubectl("get", "node", self.node_name, "-o", "json"))
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in doc["status"].get("conditions", [])
        )

    def ready(self, p: Started) -> bool:
        """Our process answers /readyz on the port it logged last (a restart appends to the same log)."""
        port = last_port(p)
        if port is None:
            return False
        return http_get(f"http://127.0.0.1:{port}/readyz", timeout=1.0)[0] == 200

    def env(self) -> dict[str, Any]:
        return {"KUBECONFIG": str(self.admin_kubeconfig)}

    # -- stop

    def down(self, *, say: Say = print) -> list[str]:
        """Stop everything the start made or adopted, in reverse; what could not be removed (empty: none)."""
        ours = [p for n, p in self.procs.items() if n.startswith("koord") or n not in _BUILT_IN]
        for p in reversed(ours):
            p.stop(timeout=15)
        kcm = self.procs.get("kube-controller-manager")
        if kcm is not None:
            kcm.stop()
        kubelet = self.procs.get("kubelet")
        api = self.procs.get("kube-apiserver")
        if kubelet is not None and kubelet.running() and api is not None and api.running():
            say("deleting every pod (the kubelet stops their containers and sandboxes)")
            self._drain()
        if kubelet is not None:
            kubelet.stop()
        node.kill_tasks(self.state)
        for name in ("kube-scheduler", "containerd", "kube-apiserver", "etcd"):
            built_in = self.procs.get(name)
            if built_in is not None:
                built_in.stop()
        left: list[str] = []
        if not self.with_node:
            return [f"process {p.name} still running" for p in self.procs.values() if p.running()]
        # Machine-wide things only when this cluster made them (its start refused to run beside them):
        # a stop of a cluster that never started must not take another's bridge or cgroups.
        if "node" in self.owned:
            node.kill_leftovers(self.state)
            left += node.clear(self.state, node.KUBELET_ROOT)
            left += node.make_private(self.made_shared)
            node.remove_leftovers(self.absent_at_start)
            if not left:
                owner.release(self.state)
        else:
            left += node.unmount_all(self.state)
        still = [p.name for p in self.procs.values() if p.running()]
        left += [f"process {n} still running" for n in still]
        return left

    def _drain(self) -> None:
        try:
            self.kubectl(
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                "--grace-period=0",
                "--force",
                "--wait=false",
                timeout=60,
            )
        except RuntimeError:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not node.ctr(self.state, "tasks", "ls", "-q", timeout=20).stdout.split():
                return
            time.sleep(0.5)


def default_state() -> Path:
    return Path(os.environ.get("STATE", str(stack.REPO / "var"))) / "cluster"
