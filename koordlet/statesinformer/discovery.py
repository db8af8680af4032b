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
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
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
FULL_SCAN_EVERY = 60.0
"""Seconds between two listings of the whole tree while the PLEG names what changed (a safety net)."""


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

    def __init__(
        self,
        host: Host,
        pod_list: str = "",
        timeout: float = 3.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        full_every: float = FULL_SCAN_EVERY,
    ) -> None:
        self.host = host
        self.pod_list = pod_list
        self.timeout = timeout
        self._warned_missing = False
        self._seen_kubepods = False
        self._clock = clock
        self.full_every = full_every
        self._known: _Known | None = None
        """By pod dir path, from the last scan; ``None``: the next scan lists every tier."""
        self._dirty: set[str] = set()
        self._trusted = False
        """Whether the last word from the PLEG named what changed (else every scan lists it all)."""
        self._lock = threading.Lock()
        """Guards what :meth:`changed` (the PLEG's thread) and a scan (a refresh) share."""
        self._full_at = 0.0
        self.dirs_listed = 0
        """Directories listed so far (every scan lists each tier and each pod dir it looks at)."""

    def changed(self, pod_dirs: Iterable[Path] | None) -> None:
        """What changed since the last scan (the PLEG's events): these pod dirs, or anything (``None``).
        Until told which dirs changed, every scan lists the whole tree."""
        with self._lock:
            self._trusted = pod_dirs is not None
            if pod_dirs is None:
                self._known = None
            elif self._known is not None:
                self._dirty.update(str(p) for p in pod_dirs)

    def _tier_bases(self) -> list[tuple[api.KubeQOSClass, str, str]]:
        layout = self.host.layout
        return [
            (
                qos,
                layout.qos_dir(qos),
                str(cgroup_dir_path(self.host.paths, self.host.mode, "cpu", layout.qos_dir(qos))),
            )
            for qos in _TIERS
        ]

    def _pod_at(self, qos: api.KubeQOSClass, tier: str, base: str, name: str) -> DiscoveredPod | None:
        uid = self.host.layout.parse_pod_dir_name(name)
        if uid is None:
            return None  # the other tiers under kubepods, or a stray dir
        layout = self.host.layout
        pod_dir = f"{tier}/{name}"
        containers: list[api.ContainerInfo] = []
        self.dirs_listed += 1
        for cname in _subdirs(f"{base}/{name}"):
            parsed = layout.parse_container_dir_name(cname)
            if parsed is not None:
                runtime, cid = parsed
                info = api.ContainerInfo(cid[:12], cid, runtime=runtime, cgroup_dir=f"{pod_dir}/{cname}")
                containers.append(info)
        return DiscoveredPod(uid, qos, pod_dir, tuple(containers))

    @staticmethod
    def _keep(path: str, found: DiscoveredPod, known: _Known, last: _Known) -> None:
        # the same PodInfo object for a pod the tree shows unchanged: readers compare by identity first
        old = last.get(path)
        known[path] = old if old is not None and old[0] == found else (found, found.pod_info())

    def scan(self) -> list[DiscoveredPod]:
        """Every pod dir of the three tiers, with its container dirs."""
        return [found for found, _ in self._scan()]

    def _scan(self) -> list[tuple[DiscoveredPod, api.PodInfo]]:
        now = self._clock()
        with self._lock:
            known, dirty, self._dirty = self._known, self._dirty, set()
            trusted = self._trusted
        if trusted and known is not None and now - self._full_at < self.full_every:
            # Only the pod dirs the events named: a thousand pods' dirs listed on every churn event
            # was most of what a pod coming or going cost.
            tiers = {base: (qos, tier) for qos, tier, base in self._tier_bases()}
            for path in dirty:
                base, _, name = path.rpartition("/")
                where = tiers.get(base)
                found = None
                if where is not None and os.path.isdir(path):
                    found = self._pod_at(where[0], where[1], base, name)
                if found is None:
                    known.pop(path, None)
                else:
                    self._keep(path, found, known, known)
            return list(known.values())
        fresh = self._scan_all(known or {})
        self._full_at = now
        with self._lock:
            # a None from the PLEG during the listing leaves it untrusted: listed again next time
            if self._known is known:
                self._known = fresh
        return list(fresh.values())

    def _scan_all(self, last: _Known) -> _Known:
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
            return {}
        self._seen_kubepods = True
        known: _Known = {}
        for qos, tier, base in self._tier_bases():
            # Plain strings and one scandir per dir: names come from the kernel's listing and are
            # parsed by the layout's strict patterns before they name anything (a refresh of 100 pods
            # through Path objects cost ~50 ms).
            self.dirs_listed += 1
            for name in _subdirs(base):
                found = self._pod_at(qos, tier, base, name)
                if found is not None:
                    self._keep(f"{base}/{name}", found, known, last)
        return known

    def list_pods(self, layout: CgroupLayout | None) -> list[api.PodInfo]:
        known: dict[str, Mapping[str, Any]] = {}
        if self.pod_list:
            try:
                known = {_uid_of(p): p for p in load_pod_list(self.pod_list, self.timeout)}
            except APIUnavailable as err:
                log.warning("pods: %s; names and resources unknown this round", str(err))
        out: list[api.PodInfo] = []
        for found, plain in self._scan():
            listed = known.get(found.uid)
            info = pod_info(listed, layout, kube_qos=found.qos) if listed is not None else None
            out.append(plain if info is None else found.enrich(info, listed or {}))
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


_Known = dict[str, tuple[DiscoveredPod, api.PodInfo]]
"""The pods of a scan by pod dir path: what the tree showed and the PodInfo handed out for it."""
