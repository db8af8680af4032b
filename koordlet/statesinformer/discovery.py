"""Standalone pod discovery from the kubepods cgroup tree, optionally enriched by a PodList.

Without a cluster the cgroup tree is the truth about which pods run here: each pod dir gives the UID
(parsed and validated by :mod:`koordlet.system.podpath`), its tier gives the Kubernetes QoS class, and
its child dirs give container IDs. A PodList (``--pod-list``, a JSON/YAML file or an http(s) URL) matched
by UID adds names, namespaces, labels, annotations and resources (parsed by
:mod:`koordlet.statesinformer.podinfo`, with the tier the pod really sits in). Pods are built as
:class:`api.PodInfo` directly from what the tree shows.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from koordlet import api
from koordlet.statesinformer.podinfo import pod_info, podlist_items
from koordlet.system.cgroups import cgroup_dir_path
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupLayout
from koordshared.apis.extension.qos import priority_class_of, qos_of
from koordshared.runtime.errors import APIUnavailable

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
    items = podlist_items(doc)
    if items is None:
        raise APIUnavailable(f"pod list {source}: not a PodList (no items)")
    return [p for p in items if isinstance(p, Mapping)]


def _subdirs(path: str) -> list[str]:
    """Names of the sub-directories of ``path``, sorted (none when it is gone)."""
    try:
        with os.scandir(path) as entries:
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _uid_of(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, Mapping) else ""


class CgroupDiscovery:
    """A pod source (``list_pods``) reading the kubepods tree of ``host``."""

    trust_empty = True
    """The tree is the truth: no pod dirs (or no kubepods dir at all) means no pods."""
    kick_rate, kick_burst = 50.0, 50
    """A scan of the local tree (about 1 ms per 100 pods), not a kubelet call: PLEG events may ask often."""

    def __init__(self, host: Host, pod_list: str = "", timeout: float = 3.0) -> None:
        self.host = host
        self.pod_list = pod_list
        self.timeout = timeout
        self._warned_missing = False
        self._seen_kubepods = False

    def scan(self) -> list[DiscoveredPod]:
        """Every pod dir of the three tiers, with its container dirs."""
        layout = self.host.layout
        root = cgroup_dir_path(self.host.paths, self.host.mode, "cpu", layout.kubepods_dir())
        if not root.is_dir():
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
        found: list[DiscoveredPod] = []
        for qos in _TIERS:
            tier = layout.qos_dir(qos)
            # Plain strings and one scandir per dir: names come from the kernel's listing and are
            # parsed by the layout's strict patterns before they name anything (a refresh of 100 pods
            # through Path objects cost ~50 ms; it runs on every PLEG event).
            base = str(cgroup_dir_path(self.host.paths, self.host.mode, "cpu", tier))
            for name in _subdirs(base):
                uid = layout.parse_pod_dir_name(name)
                if uid is None:
                    continue  # the other tiers under kubepods, or a stray dir
                pod_dir = f"{tier}/{name}"
                containers: list[api.ContainerInfo] = []
                for cname in _subdirs(f"{base}/{name}"):
                    parsed = layout.parse_container_dir_name(cname)
                    if parsed is not None:
                        runtime, cid = parsed
                        info = api.ContainerInfo(
                            cid[:12], cid, runtime=runtime, cgroup_dir=f"{pod_dir}/{cname}"
                        )
                        containers.append(info)
                found.append(DiscoveredPod(uid, qos, pod_dir, tuple(containers)))
        return found

    def list_pods(self, layout: CgroupLayout | None) -> list[api.PodInfo]:
        known: dict[str, Mapping[str, Any]] = {}
        if self.pod_list:
            try:
                known = {_uid_of(p): p for p in load_pod_list(self.pod_list, self.timeout)}
            except APIUnavailable as err:
                log.warning("pods: %s; names and resources unknown this round", str(err))
        out: list[api.PodInfo] = []
        for found in self.scan():
            listed = known.get(found.uid)
            info = pod_info(listed, layout, kube_qos=found.qos) if listed is not None else None
            out.append(found.pod_info() if info is None else found.enrich(info, listed or {}))
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class DiscoveredPod:
    """A pod dir of the kubepods tree: what the tree alone tells about a pod."""

    uid: str
    qos: api.KubeQOSClass
    """The tier the pod sits in, which decides its cgroup path whatever a pod list claims."""
    cgroup_dir: str
    containers: tuple[api.ContainerInfo, ...]

    def pod_info(self) -> api.PodInfo:
        """A running pod known only by its UID (named after it), Koordinator's defaults for its class.

        No labels to read: the class its tier implies stands in for the ``koordinator.sh/qosClass`` label
        (``qos_raw``), so a pod of the besteffort tier is a BE pod to the BE strategies, as standalone
        mode promises (a pod list, when given, brings the real labels)."""
        qos = qos_of({}, self.qos)
        return api.PodInfo(
            uid=self.uid,
            namespace="",
            name=self.uid,
            qos=qos,
            kube_qos=self.qos,
            priority_class=priority_class_of({}, None, qos),
            qos_raw=qos,
            phase="Running",
            cgroup_dir=self.cgroup_dir,
            containers=self.containers,
        )

    def enrich(self, listed: api.PodInfo, raw: Mapping[str, Any]) -> api.PodInfo:
        """The pod-list entry of this pod; a list without container IDs gets the discovered containers in
        spec order, and a list without a phase says Running (the cgroup exists)."""
        info = listed
        status = raw.get("status")
        if not (isinstance(status, Mapping) and status.get("phase")):
            info = dataclasses.replace(info, phase="Running")
        if any(c.container_id for c in info.containers):
            return info
        filled = tuple(
            dataclasses.replace(
                spec,
                container_id=found.container_id,
                runtime=found.runtime,
                cgroup_dir=found.cgroup_dir,
                running=True,
            )
            for spec, found in zip(info.containers, self.containers, strict=False)
        )
        return dataclasses.replace(info, containers=filled + info.containers[len(filled) :])
