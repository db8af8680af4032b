"""Turn a pod object (the JSON of ``v1.Pod``) into an :class:`api.PodInfo` (statesinformer layer).

Koordinator's defaulting (QoS class and priority band) is :mod:`koordshared.apis.core.pod`'s. UIDs and
container IDs come from objects anyone with ``pods/status`` may write, so they are validated before a
cgroup path is built from them; a bad one leaves the pod (or container) without a cgroup dir.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from koordlet import api
from koordlet.api.errors import UnsafePath
from koordlet.system.podpath import CgroupLayout, check_pod_uid, parse_container_id
from koordshared.apis.core.pod import Obj, kube_qos_of
from koordshared.apis.core.pod import as_list as _list
from koordshared.apis.core.pod import as_map as _map
from koordshared.apis.core.pod import str_map as _str_map
from koordshared.apis.extension.qos import (
    BATCH_CPU,
    BATCH_MEMORY,
    MID_CPU,
    MID_MEMORY,
    priority_class_of,
    qos_of,
    qos_raw,
)
from koordshared.apis.meta.quantity import to_int, to_milli
from koordshared.runtime.errors import InvalidValue
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_refusals = OncePerChange(log)
"""A bad pod stays in every list until it is fixed or deleted: its refusal is logged once."""


def resource_amount(values: Mapping[str, Any], name: str, *, milli: bool, where: str) -> int:
    """The quantity ``values[name]`` in millis (``milli``) or units; 0 when absent or unparsable (warned)."""
    raw = values.get(name)
    if raw is None:
        return 0
    try:
        return to_milli(raw) if milli else to_int(raw)
    except (InvalidValue, TypeError):
        _refusals.warning(f"{where} {name}", f"{where}: ignoring unparsable {name} quantity {raw!r}")
        return 0


def _container(
    spec: Obj, status: Obj | None, layout: CgroupLayout | None, uid: str, kube_qos: api.KubeQOSClass, who: str
) -> api.ContainerInfo:
    name = str(spec.get("name", ""))
    res = _map(spec, "resources")
    req, lim = _map(res, "requests"), _map(res, "limits")
    where = f"{who}/{name}"
    cid, runtime, cgroup_dir = "", "", ""
    raw_id = status.get("containerID") if status else None
    if isinstance(raw_id, str) and raw_id:
        try:
            runtime, cid = parse_container_id(raw_id)
        except UnsafePath as err:
            _refusals.warning(f"{where} id", f"{where}: refusing container ID: {err}")
        else:
            if layout is not None:
                try:
                    cgroup_dir = layout.container_dir(uid, kube_qos, raw_id)
                except UnsafePath as err:
                    _refusals.warning(f"{where} dir", f"{where}: no cgroup dir: {err}")
    running = bool(status is not None and "running" in _map(status, "state"))
    # batch-cpu is an extended resource counted in millicores, so its integer value IS the millis.
    return api.ContainerInfo(
        name=name,
        container_id=cid,
        runtime=runtime,
        cgroup_dir=cgroup_dir,
        running=running,
        cpu_request_milli=resource_amount(req, "cpu", milli=True, where=where),
        cpu_limit_milli=resource_amount(lim, "cpu", milli=True, where=where),
        memory_request_bytes=resource_amount(req, "memory", milli=False, where=where),
        memory_limit_bytes=resource_amount(lim, "memory", milli=False, where=where),
        batch_cpu_request_milli=resource_amount(req, BATCH_CPU, milli=False, where=where),
        batch_cpu_limit_milli=resource_amount(lim, BATCH_CPU, milli=False, where=where),
        batch_memory_request_bytes=resource_amount(req, BATCH_MEMORY, milli=False, where=where),
        batch_memory_limit_bytes=resource_amount(lim, BATCH_MEMORY, milli=False, where=where),
        mid_cpu_request_milli=resource_amount(req, MID_CPU, milli=False, where=where),
        mid_memory_request_bytes=resource_amount(req, MID_MEMORY, milli=False, where=where),
    )


def _created_at(meta: Obj) -> float:
    raw = meta.get("creationTimestamp")
    if not isinstance(raw, str) or not raw:
        return 0.0
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _pod_ips(status: Obj, who: str) -> tuple[str, ...]:
    """``status.podIPs`` (else ``status.podIP``) as canonical addresses; anything else is dropped (warned):
    network QoS builds kernel filters from them."""
    raw = [e.get("ip") for e in _list(status, "podIPs") if isinstance(e, Mapping)] or [status.get("podIP")]
    out: list[str] = []
    for ip in raw:
        if not isinstance(ip, str) or not ip:
            continue
        try:
            out.append(str(ipaddress.ip_address(ip)))
        except ValueError:
            log.warning("pod %s: ignoring pod IP %r: not an address", who, ip[:64])
    return tuple(dict.fromkeys(out))


def _owner_kind(meta: Obj) -> str:
    for ref in _list(meta, "ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind", ""))
    return ""


def pod_info(
    pod: Obj, layout: CgroupLayout | None, *, kube_qos: api.KubeQOSClass | None = None
) -> api.PodInfo | None:
    """The :class:`api.PodInfo` of ``pod``; ``None`` when it has no UID at all (not a pod object).

    ``layout`` builds the cgroup dirs; ``None`` (layout unknown) leaves them empty. ``kube_qos`` overrides
    the pod's own QoS class (cgroup discovery knows the tier the pod really sits in).
    """
    meta, spec, status = _map(pod, "metadata"), _map(pod, "spec"), _map(pod, "status")
    raw_uid = meta.get("uid")
    if not isinstance(raw_uid, str) or not raw_uid:
        return None
    who = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    labels, annotations = _str_map(_map(meta, "labels")), _str_map(_map(meta, "annotations"))
    kube_qos = kube_qos or kube_qos_of(pod)
    qos = qos_of(labels, kube_qos)
    raw_priority = spec.get("priority")
    priority = raw_priority if isinstance(raw_priority, int) and not isinstance(raw_priority, bool) else None
    try:
        uid = check_pod_uid(raw_uid)
        safe_layout = layout
    except UnsafePath as err:
        _refusals.warning(f"pod {who}", f"pod {who}: {err}; kept without cgroup dirs")
        uid, safe_layout = raw_uid[:64], None
    statuses = {
        str(s.get("name", "")): s for s in _list(status, "containerStatuses") if isinstance(s, Mapping)
    }
    containers = tuple(
        _container(c, statuses.get(str(c.get("name", ""))), safe_layout, uid, kube_qos, who)
        for c in _list(spec, "containers")
        if isinstance(c, Mapping)
    )
    init_statuses = {
        str(s.get("name", "")): s for s in _list(status, "initContainerStatuses") if isinstance(s, Mapping)
    }
    sidecars = tuple(
        _container(c, init_statuses.get(str(c.get("name", ""))), safe_layout, uid, kube_qos, who)
        for c in _list(spec, "initContainers")
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    )
    return api.PodInfo(
        uid=uid,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        qos=qos,
        kube_qos=kube_qos,
        priority_class=priority_class_of(labels, priority, qos),
        priority=priority,
        phase=str(status.get("phase", "") or "Pending"),
        labels=labels,
        annotations=annotations,
        cgroup_dir=safe_layout.pod_dir(uid, kube_qos) if safe_layout is not None else "",
        containers=containers,
        node_name=str(spec.get("nodeName", "")),
        owner_kind=_owner_kind(meta),
        created_at=_created_at(meta),
        ips=_pod_ips(status, who),
        host_network=spec.get("hostNetwork") is True,
        sidecars=sidecars,
        qos_raw=qos_raw(labels),
    )


def pod_infos(objects: Iterable[Obj], layout: CgroupLayout | None) -> list[api.PodInfo]:
    """The pods of a PodList's items (``v1.Pod`` JSON); items without a UID are not pods."""
    return [p for p in (pod_info(obj, layout) for obj in objects) if p is not None]


def podlist_items(doc: object) -> list[Any] | None:
    """The ``items`` of a PodList, or None when ``doc`` is not one. The kubelet is a Go server: with no
    pods it sends ``"items": null`` (a nil slice), which is an empty list, not a malformed answer."""
    if not isinstance(doc, Mapping) or doc.get("kind", "PodList") != "PodList" or "items" not in doc:
        return None
    items = doc["items"]
    if items is None:
        return []
    return items if isinstance(items, list) else None
