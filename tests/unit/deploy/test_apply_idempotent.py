"""Every manifest under ``deploy/`` re-applies as a no-op: nothing in it is a value kube-apiserver drops or
rewrites, which ``kubectl apply`` would send again on every run (and ``kubectl diff`` show after it).

The patterns: a ``false`` on a Go ``bool`` field tagged ``omitempty`` (the server stores nothing, so the
three-way merge always finds it missing: ``hostNetwork: false``); an empty map or list where the field
is ``omitempty`` (dropped the same way); a ``rollingUpdate`` without its ``type`` (written out, so the
strategy reads the same in the manifest and in the object); a quantity not in the canonical form the
server stores (``0.5`` comes back as ``500m``, ``1024Mi`` as ``1Gi``); and a namespace on a
cluster-scoped object (dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from koordshared.apis.meta.quantity import format_bytes, format_decimal, parse_quantity
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
BUILTIN_GROUPS = ("v1", "apps/v1", "rbac.authorization.k8s.io/v1", "policy/v1", "apiextensions.k8s.io/v1")
"""apiVersions whose objects are Go structs on the server (custom resources keep what they are given)."""
OMITTED_FALSE = {
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "stdin",
    "stdinOnce",
    "tty",
    "readOnly",
    "publishNotReadyAddresses",
    "preserveUnknownFields",
}
"""Non-pointer ``bool`` fields with ``omitempty`` in the built-in types these manifests use (k8s.io/api:
PodSpec, Container, VolumeMount, ServiceSpec; apiextensions: CustomResourceDefinitionSpec)."""
KEPT_EMPTY = {"emptyDir", "status", "podSelector", "selector", "scale"}
"""Fields whose empty value means something and is stored (pointers to structs: an emptyDir, a CRD's
status or scale subresource, a selector matching everything)."""
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
}
QUANTITY_PARENTS = {"requests", "limits"}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion") in BUILTIN_GROUPS:
                name = (doc.get("metadata") or {}).get("name", "")
                out.append((f"{path.relative_to(DEPLOY)}:{doc['kind']}/{name}", doc))
    return out


def walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, (*path, f"[{i}]"))


def canonical(text: str) -> str:
    """The string kube-apiserver stores for a quantity (``resource.Quantity``'s canonical form)."""
    value = parse_quantity(text)
    if re.search(r"[KMGTPE]i\Z", text) and value.denominator == 1:
        return format_bytes(int(value))
    milli = value * 1000
    if milli.denominator != 1 or re.search(r"[eE]", text):
        return text  # sub-milli or exponent forms: not used here, left to the server
    return format_decimal(int(milli) // 1000) if milli % 1000 == 0 else f"{int(milli)}m"


def problems(obj: dict[str, Any]) -> list[str]:
    out = []
    if obj["kind"] in CLUSTER_SCOPED and "namespace" in (obj.get("metadata") or {}):
        out.append("metadata.namespace on a cluster-scoped object")
    if obj["kind"] == "ConfigMap":
        obj = {k: v for k, v in obj.items() if k not in ("data", "binaryData")}  # opaque strings
    for path, value in walk(obj):
        where = ".".join(path)
        key = path[-1] if path else ""
        if value is False and key in OMITTED_FALSE:
            out.append(f"{where}: false is the default the server omits")
        if value in ({}, []) and key not in KEPT_EMPTY and not key.startswith("["):
            out.append(f"{where}: an empty value the server omits")
        if isinstance(value, dict) and "rollingUpdate" in value and value.get("type") != "RollingUpdate":
            out.append(f"{where}: rollingUpdate without type: RollingUpdate")
        in_resources = len(path) >= 2 and path[-2] in QUANTITY_PARENTS
        if isinstance(value, str) and (in_resources or key == "sizeLimit") and canonical(value) != value:
            out.append(f"{where}: {value!r} is stored as {canonical(value)!r}")
    return out


@pytest.mark.parametrize(("where", "obj"), manifests(), ids=[w for w, _ in manifests()])
def test_nothing_the_server_drops_or_rewrites(where: str, obj: dict[str, Any]) -> None:
    assert problems(obj) == [], where


def test_every_manifest_directory_is_covered() -> None:
    covered = {w.split("/")[0] for w, _ in manifests()}
    assert covered == {"daemonset", "manager", "descheduler", "scheduler"}


@pytest.mark.parametrize(
    ("patch", "found"),
    [
        ({"spec": {"template": {"spec": {"hostNetwork": False}}}}, "false is the default"),
        ({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}}, "without type"),
        ({"metadata": {"labels": {}}}, "empty value"),
        (
            {"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "0.5"}}}]}}}},
            "'500m'",
        ),
        ({"spec": {"template": {"spec": {"volumes": [{"emptyDir": {"sizeLimit": "1024Mi"}}]}}}}, "'1Gi'"),
    ],
)
def test_the_check_finds_each_pattern(patch: dict[str, Any], found: str) -> None:
    obj = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"}, **patch}
    assert any(found in p for p in problems(obj)), problems(obj)
    assert problems({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "namespace": "x"}})
    assert (
        problems({"kind": "Deployment", "spec": {"template": {"spec": {"volumes": [{"emptyDir": {}}]}}}})
        == []
    )
