"""Core ``v1`` Services and Secrets as stored objects.

Services: ``SetDefaults_Service`` (``pkg/apis/core/v1/defaults.go``: type ClusterIP, sessionAffinity
None, each port's protocol TCP and targetPort its port, the Cluster traffic policies) and the Service
REST storage's allocation (``pkg/registry/core/service/storage``): a ClusterIP, NodePort or LoadBalancer
service gets a free cluster IP from 10.96.0.0/12 (10.96.0.1 stays for ``kubernetes``; ``None`` makes it
headless; a requested IP must be in the range and free, else 422) with ``ipFamilies`` IPv4 and
``SingleStack``, NodePort and LoadBalancer ports a free node port in 30000-32767. On update the allocated
values are kept when the new object leaves them out (``patchAllocatedValues``) and may not change
otherwise; allocation happens on API creates only (a test seeding the store writes what it gives).
Validation: ports required (except ExternalName and headless), in 1-65535, with TCP/UDP/SCTP, named
and unique when there are several.

Secrets: type Opaque by default; ``stringData`` is merged into ``data`` (base64) and never stored; a
``data`` value that is not base64 does not decode (400); keys and size as ConfigMaps'; ``kubernetes.io/tls``
needs ``tls.crt`` and ``tls.key``, ``kubernetes.io/dockerconfigjson`` its ``.dockerconfigjson``; the type
and an ``immutable`` secret's data cannot change.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
from typing import TYPE_CHECKING, Any

from tests.apiserver import status, validation
from tests.apiserver.status import Cause
from tests.apiserver.strategy import Strategy

if TYPE_CHECKING:
    from tests.apiserver.store import Store

Obj = dict[str, Any]
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
KUBERNETES_SERVICE_IP = SERVICE_CIDR.network_address + 1
NODE_PORTS = range(30000, 32768)
_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_SECRET_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


class ServiceStrategy(Strategy):
    """``pkg/registry/core/service/strategy.go``."""

    def defaults(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["sessionAffinity"] == "None":
            spec.pop("sessionAffinityConfig", None)
        for port in spec.get("ports") or ():
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if port.get("targetPort") in (None, 0, ""):
                    port["targetPort"] = port.get("port")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
            spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        if not keep_status or not isinstance(obj.get("status"), dict):
            obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str | None) -> None:
        if subresource:
            return
        spec, before = new.setdefault("spec", {}), _spec(old)
        if spec.get("type") == before.get("type"):
            for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if field not in spec and field in before:
                    spec[field] = copy.deepcopy(before[field])
            old_ports = {(p.get("port"), p.get("protocol")): p for p in before.get("ports") or ()}
            for port in spec.get("ports") or ():
                was = old_ports.get((port.get("port"), port.get("protocol")))
                if was is not None and "nodePort" in was and not port.get("nodePort"):
                    port["nodePort"] = was["nodePort"]

    def validate(self, obj: Obj) -> list[Cause]:
        spec = _spec(obj)
        out: list[Cause] = []
        typ = spec.get("type")
        if typ not in _TYPES:
            out.append(("spec.type", f'"{typ}": supported values: {", ".join(_TYPES)}', "NotSupported"))
        ports = spec.get("ports") or []
        if not ports and typ != "ExternalName" and spec.get("clusterIP") != "None":
            out.append(("spec.ports", "", "Required"))
        names = set()
        for i, port in enumerate(ports):
            at = f"spec.ports[{i}]"
            number = port.get("port")
            if not isinstance(number, int) or not 0 < number < 65536:
                out.append((f"{at}.port", f"{number!r}: must be between 1 and 65535, inclusive"))
            if port.get("protocol") not in _PROTOCOLS:
                out.append((f"{at}.protocol", f'"{port.get("protocol")}"', "NotSupported"))
            name = port.get("name") or ""
            if len(ports) > 1 and not name:
                out.append((f"{at}.name", "", "Required"))
            elif name in names:
                out.append((f"{at}.name", f'"{name}"', "Duplicate"))
            names.add(name)
        if typ == "ExternalName" and not spec.get("externalName"):
            out.append(("spec.externalName", "", "Required"))
        return out

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        if subresource:
            return []
        out = self.validate(new)
        before, after = _spec(old), _spec(new)
        if (
            before.get("type") == after.get("type")
            and before.get("clusterIP")
            and after.get("clusterIP") != before["clusterIP"]
        ):
            out.append(("spec.clusterIPs[0]", f'"{after.get("clusterIP")}": may not change once set'))
        return out


def allocate(store: Store, namespace: str, obj: Obj) -> Obj:
    """The Service REST storage's create: cluster IP and node ports, taken among those in use."""
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        return out
    typ = spec.get("type") or "ClusterIP"
    name = str((out.get("metadata") or {}).get("name") or "")
    services, _ = store.list("services")
    if typ != "ExternalName":
        taken = {
            s_ip
            for s in services
            for s_ip in (_spec(s).get("clusterIPs") or [_spec(s).get("clusterIP")])
            if s_ip
        }
        wanted = spec.get("clusterIP") or ((spec.get("clusterIPs") or [None])[0])
        if wanted == "None":
            ip = "None"
        elif wanted:
            ip = _check_requested(str(wanted), taken, name)
        else:
            ip = _first_free(taken, name)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if typ in ("NodePort", "LoadBalancer"):
        used = {p.get("nodePort") for s in services for p in _spec(s).get("ports") or () if p.get("nodePort")}
        for port in spec.get("ports") or ():
            if isinstance(port, dict) and not port.get("nodePort"):
                port["nodePort"] = next((n for n in NODE_PORTS if n not in used), None)
                used.add(port["nodePort"])
    return out


def _check_requested(wanted: str, taken: set[str], name: str) -> str:
    try:
        address = ipaddress.ip_address(wanted)
    except ValueError:
        raise status.invalid(
            "Service", "", name, [("spec.clusterIPs[0]", f'"{wanted}": must be a valid IP address')]
        ) from None
    if address not in SERVICE_CIDR:
        why = f'"{wanted}": failed to allocate IP {wanted}: the provided IP ({wanted}) is not in the valid '
        why += "range"
        raise status.invalid("Service", "", name, [("spec.clusterIPs", why)])
    if wanted in taken:
        why = f'"{wanted}": failed to allocate IP {wanted}: provided IP is already allocated'
        raise status.invalid("Service", "", name, [("spec.clusterIPs", why)])
    return wanted


def _first_free(taken: set[str], name: str) -> str:
    for address in SERVICE_CIDR.hosts():
        if address != KUBERNETES_SERVICE_IP and str(address) not in taken:
            return str(address)
    raise status.internal(f"failed to allocate a serviceIP for {name}: range is full")


class SecretStrategy(Strategy):
    """``pkg/registry/core/secret/strategy.go`` with ``SetDefaults_Secret`` and the v1 conversion."""

    def decode_problems(self, obj: Obj) -> list[str]:
        out = super().decode_problems(obj)
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                out.append(f"data[{key}]: illegal base64 data")
        return out

    def defaults(self, obj: Obj) -> None:
        obj.setdefault("type", "Opaque")
        given = obj.pop("stringData", None)
        if isinstance(given, dict) and given:
            raw = obj.get("data")
            data = raw if isinstance(raw, dict) else {}
            for key, value in given.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data

    def validate(self, obj: Obj) -> list[Cause]:
        data = obj.get("data") or {}
        out = validation.configmap_errors({"data": data})
        for key in _SECRET_KEYS.get(str(obj.get("type")), ()):
            if key not in data:
                out.append((f"data[{key}]", "", "Required"))
        return out

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        out = self.validate(new)
        if new.get("type") != old.get("type"):
            out.append(("type", "field is immutable"))
        return out + validation.configmap_update_errors(new, old)
