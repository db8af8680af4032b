"""A kubelet whose containers are real processes in real cgroups: one per simulated node, for end-to-end
runs of the whole colocation loop on one machine (and the demo).

:class:`ProcessKubelet` registers its Node (capacity, Ready, ``127.0.0.1`` and its ``/pods`` port as the
kubelet endpoint), watches the pods bound to it, and for each one makes the pod and container cgroups
under its own kubepods parent (``RealKubepods``), starts a busy process per container burning the CPU
the pod's ``koordlet.test/busy-cpu`` annotation asks for (``"250m"``; none: an idle container), and
reports the pod Running and Ready with its QoS class and ``containerd://`` container IDs. It serves
``GET /pods/`` as the kubelet's read-only port does, which is where the agent reads its pods. A pod being
deleted (``deletionTimestamp``: a delete or an eviction) has its processes killed and cgroups removed,
then the deletion is confirmed (delete with grace 0 and the pod's UID), as the kubelet's status manager
does. It keeps the node's ``/proc`` view (:mod:`tests.cluster.nodeproc`) current. :meth:`close` kills
and removes everything it made.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from koordlet.testing.cgroups import RealKubepods, RealPod
from koordshared.apis.core.pod import kube_qos_of
from koordshared.apis.meta.quantity import format_time, parse_quantity, to_int
from koordshared.kube.client import ApiError, request
from koordshared.kube.informer import EventHandler, Informer
from koordshared.runtime.errors import APIUnavailable
from tests.cluster.nodeproc import NodeProcView

log = logging.getLogger(__name__)

BUSY_ANNOTATION = "koordlet.test/busy-cpu"
Obj = dict[str, Any]


def busy_cores(pod: Obj) -> float:
    """The CPU the pod's containers burn, in cores, from its annotation (0 when absent or malformed)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(BUSY_ANNOTATION)
    try:
        return float(parse_quantity(raw)) if raw else 0.0
    except Exception:
        return 0.0


@dataclass
class Running:
    uid: str
    real: RealPod
    container_ids: list[str]


class _PodsHandler(BaseHTTPRequestHandler):
    server: _PodsServer

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/pods":
            self.send_error(404)
            return
        body = json.dumps({"kind": "PodList", "apiVersion": "v1", "items": self.server.pods()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _PodsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pods: Callable[[], list[Obj]]) -> None:
        super().__init__(("127.0.0.1", 0), _PodsHandler)
        self.pods = pods


class ProcessKubelet:
    def __init__(
        self,
        api_client: Any,
        node: str,
        work_dir: Path,
        *,
        cpu: str = "2",
        memory: str = "4Gi",
        labels: dict[str, str] | None = None,
        on_event: Callable[[str], None] = lambda _msg: None,
    ) -> None:
        from kubernetes import client

        self.api = api_client
        self.node = node
        self.cpu, self.memory = cpu, memory
        self.labels = {"kubernetes.io/hostname": node, **(labels or {})}
        self.say = on_event
        self.kubepods = RealKubepods()
        self.proc = NodeProcView(
            work_dir / node / "proc",
            max(int(parse_quantity(cpu)), 1),
            to_int(memory),
            cpu_ns=lambda: self.kubepods.cpu_usage_ns(self.kubepods.parent),
            memory_used=self._memory_used,
        )
        self.pods = Informer(
            f"pods-{node}",
            client.CoreV1Api(api_client).list_pod_for_all_namespaces,
            {"field_selector": f"spec.nodeName={node}"},
            request_timeout=5.0,
        )
        self.pods.add_handler(EventHandler(lambda _o: self._wake.set(), lambda _o, _n: self._wake.set()))
        self.server = _PodsServer(lambda: [dict(p) for p in self.pods.objects()])
        self.port = int(self.server.server_address[1])
        self.running: dict[str, Running] = {}
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def proc_root(self) -> Path:
        return self.proc.root

    @property
    def cgroup_parent(self) -> str:
        return self.kubepods.parent

    def _memory_used(self) -> int | None:
        try:
            return int(
                self.kubepods.path("memory", self.kubepods.parent, "memory.usage_in_bytes").read_text()
            )
        except OSError:
            return None

    # ---- node ---------------------------------------------------------------------------------------------

    def register(self) -> None:
        """Create the Node, then report its status (capacity, Ready, where its kubelet answers)."""
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": "110"}
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node, "labels": self.labels}}
        try:
            request(self.api, "register node", "POST", "/api/v1/nodes", body=node)
        except ApiError as err:
            if not err.conflict:
                raise
        now = format_time(time.time())
        status = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
        }
        request(
            self.api,
            "node status",
            "PATCH",
            f"/api/v1/nodes/{self.node}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    # ---- pods ---------------------------------------------------------------------------------------------

    def _start_pod(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = str(meta["uid"])
        qos = kube_qos_of(pod)
        real = self.kubepods.add_pod(qos, uid)
        ids = []
        cores = busy_cores(pod)
        for i in range(len(spec.get("containers") or [])):
            cid = uuid.uuid4().hex + uuid.uuid4().hex
            container = self.kubepods.add_container(real, cid)
            if cores > 0 and i == 0:
                self.kubepods.busy(container, duty=cores)
            ids.append(cid)
        self.running[uid] = Running(uid, real, ids)
        now = format_time(time.time())
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        statuses = [
            {
                "name": c.get("name"),
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": f"containerd://{cid}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c, cid in zip(spec.get("containers") or [], ids, strict=True)
        ]
        status = {
            "phase": "Running",
            "qosClass": qos.value,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        self._patch_status(pod, status)
        key = f"{meta['namespace']}/{meta['name']}"
        self.say(f"started {key} ({qos.value}, {cores:g} cores busy)")

    def _patch_status(self, pod: Obj, status: Obj) -> None:
        meta = pod["metadata"]
        request(
            self.api,
            f"status of {meta['name']}",
            "PATCH",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    def _stop_pod(self, uid: str) -> None:
        running = self.running.pop(uid, None)
        if running is not None:
            self.kubepods.remove_pod(running.real)

    def _confirm_deletion(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._stop_pod(str(meta["uid"]))
        try:
            request(
                self.api,
                f"confirm deletion of {meta['name']}",
                "DELETE",
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                body={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )
        except ApiError as err:
            if not (err.not_found or err.conflict):
                raise
        key = f"{meta['namespace']}/{meta['name']}"
        self.say(f"stopped {key}: processes killed, cgroups removed, deletion confirmed")

    def sync(self) -> None:
        """Start new pods, finish terminating ones, forget pods gone from the API."""
        seen = set()
        for pod in self.pods.objects():
            meta = pod["metadata"]
            uid = str(meta["uid"])
            seen.add(uid)
            try:
                if meta.get("deletionTimestamp"):
                    self._confirm_deletion(dict(pod))
                elif uid not in self.running and (pod.get("status") or {}).get("phase") not in (
                    "Succeeded",
                    "Failed",
                ):
                    self._start_pod(dict(pod))
            except (ApiError, APIUnavailable) as err:
                log.warning("kubelet %s: %s: %s", self.node, meta.get("name"), err)
        for uid in [u for u in self.running if u not in seen]:
            self._stop_pod(uid)  # deleted without a grace period

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        self.register()
        for name, target in (
            ("pods", lambda: self.pods.run(stop)),
            ("http", self.server.serve_forever),
            ("sync", lambda: self._loop(stop)),
        ):
            t = threading.Thread(target=target, name=f"kubelet-{self.node}-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.wait(0.25)
            self._wake.clear()
            if stop.is_set():
                return
            self.proc.update()
            if self.pods.has_synced():
                try:
                    self.sync()
                except Exception:
                    log.exception("kubelet %s: sync failed", self.node)

    def close(self) -> None:
        """Stop serving and watching; kill every process and remove every cgroup made here."""
        self.pods.close()
        self.server.shutdown()
        self.server.server_close()
        self._wake.set()
        for t in self._threads:
            t.join(5)
        self.running.clear()
        self.kubepods.cleanup()
