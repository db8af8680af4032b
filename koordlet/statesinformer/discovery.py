"""Standalone pod discovery from the kubepods cgroup tree, optionally enriched by a PodList.

Without a cluster the cgroup tree is the truth about which pods run here: each pod dir gives the UID
(parsed and validated by :mod:`koordlet.system.podpath`), its tier gives the Kubernetes QoS class, and
its child dirs give container IDs. A PodList (``--pod-list``, a JSON/YAML file or an http(s) URL) matched
by UID adds names, namespaces, labels, annotations and resources. The result is pod objects in the
``v1.Pod`` JSON shape, so one builder (:mod:`koordlet.statesinformer.podinfo`) serves every source.
"""

from __future__ import annotations

import copy
import json
import logging
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from koordlet import api
from koordlet.errors import APIUnavailable
from koordlet.system.host import Host

log = logging.getLogger(__name__)

_TIERS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
MAX_POD_LIST_BYTES = 64 * 1024 * 1024


def load_pod_list(source: str, timeout: float) -> list[Mapping[str, Any]]:
    """Items of a PodList read from a file (JSON or YAML) or an http(s) URL; :class:`APIUnavailable` if
    it cannot be read or is not a PodList."""
    try:
        if source.startswith(("http://", "https://")):
            with urllib.request.urlopen(source, timeout=timeout) as resp:
                text = resp.read(MAX_POD_LIST_BYTES).decode()
        else:
            text = Path(source).read_text()
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise APIUnavailable(f"pod list {source}: {err}") from err
    items = doc.get("items") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        raise APIUnavailable(f"pod list {source}: not a PodList (no items)")
    return [p for p in items if isinstance(p, Mapping)]


def _uid_of(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, Mapping) else ""


class CgroupDiscovery:
    """A pod source (``list_pods``) reading the kubepods tree of ``host``."""

    trust_empty = True
    """The tree is the truth: no pod dirs (or no kubepods dir at all) means no pods."""

    def __init__(self, host: Host, pod_list: str = "", timeout: float = 3.0) -> None:
        self.host = host
        self.pod_list = pod_list
        self.timeout = timeout
        self._warned_missing = False
        self._seen_kubepods = False

    def scan(self) -> list[tuple[str, api.KubeQOSClass, list[tuple[str, str]]]]:
        """``(uid, kube qos, [(runtime, container id)])`` of every pod dir, tier by tier."""
        layout = self.host.layout
        if not self.host.list_cgroups(layout.kubepods_dir(), 0):
            if self._seen_kubepods:  # it was there: a vanished tree is suspicious, keep the known pods
                raise APIUnavailable(f"kubepods cgroup {layout.kubepods_dir()!r} disappeared")
            # A standalone host without a kubelet (or before it starts) simply has no pods yet.
            if not self._warned_missing:
                log.warning(
                    "no kubepods cgroup at %r: no pods yet (kubelet not started?)", layout.kubepods_dir()
                )
                self._warned_missing = True
            return []
        self._seen_kubepods = True
        found: list[tuple[str, api.KubeQOSClass, list[tuple[str, str]]]] = []
        for qos in _TIERS:
            tier = layout.qos_dir(qos)
            for pod_dir in self.host.list_cgroups(tier, 1)[1:]:
                uid = layout.parse_pod_dir_name(pod_dir.rsplit("/", 1)[-1])
                if uid is None:
                    continue  # the other tiers under kubepods, or a stray dir
                containers: list[tuple[str, str]] = []
                for cdir in self.host.list_cgroups(pod_dir, 1)[1:]:
                    parsed = layout.parse_container_dir_name(cdir.rsplit("/", 1)[-1])
                    if parsed is not None:
                        containers.append(parsed)
                found.append((uid, qos, containers))
        return found

    def list_pods(self) -> list[Mapping[str, Any]]:
        known: dict[str, Mapping[str, Any]] = {}
        if self.pod_list:
            try:
                known = {_uid_of(p): p for p in load_pod_list(self.pod_list, self.timeout)}
            except APIUnavailable as err:
                log.warning("pods: %s; names and resources unknown this round", str(err))
        return [self._pod(uid, qos, containers, known.get(uid)) for uid, qos, containers in self.scan()]

    @staticmethod
    def _pod(
        uid: str,
        qos: api.KubeQOSClass,
        containers: list[tuple[str, str]],
        listed: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        ids = [f"{rt}://{cid}" if rt else cid for rt, cid in containers]
        if listed is not None:
            pod = copy.deepcopy(dict(listed))
            status = pod.setdefault("status", {})
            # The tier the pod really sits in decides its cgroup path, whatever the list claims.
            status["qosClass"] = qos.value
            status.setdefault("phase", "Running")
            if not any(s.get("containerID") for s in status.get("containerStatuses") or ()):
                names = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or ()]
                status["containerStatuses"] = [
                    {
                        "name": names[i] if i < len(names) else cid[-64:][:12],
                        "containerID": cid,
                        "state": {"running": {}},
                    }
                    for i, cid in enumerate(ids)
                ]
            return pod
        return {
            "metadata": {"uid": uid, "name": uid, "namespace": ""},
            "spec": {"containers": [{"name": cid[-64:][:12]} for cid in ids]},
            "status": {
                "phase": "Running",
                "qosClass": qos.value,
                "containerStatuses": [
                    {"name": cid[-64:][:12], "containerID": cid, "state": {"running": {}}} for cid in ids
                ],
            },
        }
