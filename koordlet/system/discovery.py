"""Pod discovery from the kubepods cgroup tree (standalone mode without a kubelet, and the PLEG).

Scans the three kube QoS tiers of the host's layout in the cpu hierarchy (the unified tree on v2) and
returns every pod dir whose name parses as a pod of that driver, with its container dirs. Names that do
not parse (tiers, foreign dirs, malformed or hostile names) are skipped, never turned into paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from koordlet.api import KubeQOSClass
from koordlet.system.cgroups import CgroupMode, cgroup_dir_path
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupLayout

# Guaranteed pods sit directly in kubepods, next to the burstable/besteffort tiers.
_TIERS = (KubeQOSClass.GUARANTEED, KubeQOSClass.BURSTABLE, KubeQOSClass.BESTEFFORT)


@dataclass(frozen=True, slots=True)
class DiscoveredContainer:
    container_id: str
    runtime: str
    """``""`` under the cgroupfs driver (dir names carry no runtime)."""
    cgroup_dir: str


@dataclass(frozen=True, slots=True)
class DiscoveredPod:
    uid: str
    kube_qos: KubeQOSClass
    cgroup_dir: str
    containers: tuple[DiscoveredContainer, ...]
    """Includes the sandbox (pause) container: the tree cannot tell it apart."""


def _subdirs(paths: HostPaths, mode: CgroupMode, rel: str) -> list[str]:
    try:
        with os.scandir(cgroup_dir_path(paths, mode, "cpu", rel)) as entries:
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []  # tier absent, or the pod went away while we scanned


def discover_pods(paths: HostPaths, mode: CgroupMode, layout: CgroupLayout) -> list[DiscoveredPod]:
    """Every pod in the tree of ``layout``, sorted by tier then UID; a pod seen twice keeps its first."""
    pods: list[DiscoveredPod] = []
    seen: set[str] = set()
    for qos in _TIERS:
        tier = layout.qos_dir(qos)
        for name in _subdirs(paths, mode, tier):
            uid = layout.parse_pod_dir_name(name)
            if uid is None or uid in seen:
                continue
            # The systemd name carries the tier; a burstable-named pod found in kubepods.slice is ignored.
            if layout.pod_dir_name(uid, qos) != name:
                continue
            seen.add(uid)
            pod_dir = f"{tier}/{name}"
            containers = []
            for cname in _subdirs(paths, mode, pod_dir):
                parsed = layout.parse_container_dir_name(cname)
                if parsed is not None:
                    containers.append(DiscoveredContainer(parsed[1], parsed[0], f"{pod_dir}/{cname}"))
            pods.append(DiscoveredPod(uid, qos, pod_dir, tuple(containers)))
    return pods
