"""Built-in objects of the manifests use only fields Kubernetes knows (``kubectl --validate=strict``
without a server): each key is looked up in the official client's models, recursively, with scalar
types checked, so a misspelled ``mountPropagation`` or a string where an int belongs fails here."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy" / "daemonset"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
}
SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "bool": (bool,), "float": (int, float)}
INT_OR_STRING = {"V1RollingUpdateDaemonSet": {"max_unavailable", "max_surge"}, "V1HTTPGetAction": {"port"}}
"""Fields the client types as ``object`` that the API defines as IntOrString."""


def unknown_fields(value: Any, type_name: str, path: str) -> list[str]:
    """Every key or value of ``value`` that the model ``type_name`` does not admit."""
    if m := re.fullmatch(r"List\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: want a list"]
        return [p for i, item in enumerate(value) for p in unknown_fields(item, m.group(1), f"{path}[{i}]")]
    if m := re.fullmatch(r"Dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            return [f"{path}: want a mapping"]
        return [p for k, v in value.items() for p in unknown_fields(v, m.group(1), f"{path}.{k}")]
    if type_name in SCALARS:
        # Quantities and labels are strings: a YAML 1 or true there is refused by the API server.
        ok = isinstance(value, SCALARS[type_name]) and not (type_name == "int" and isinstance(value, bool))
        return [] if ok else [f"{path}: want {type_name}, got {value!r}"]
    if type_name == "object":
        return []
    model = getattr(client, type_name)
    if not isinstance(value, dict):
        return [f"{path}: want an object ({type_name})"]
    by_json = {j: attr for attr, j in model.attribute_map.items()}
    problems: list[str] = []
    for key, item in value.items():
        attr = by_json.get(key)
        if attr is None:
            problems.append(f"{path}.{key}: unknown field of {type_name}")
        elif attr in INT_OR_STRING.get(type_name, set()):
            if not isinstance(item, int | str) or isinstance(item, bool):
                problems.append(f"{path}.{key}: want int or string")
        else:
            problems.extend(unknown_fields(item, model.openapi_types[attr], f"{path}.{key}"))
    return problems


def builtin_objects() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and (doc["apiVersion"], doc["kind"]) in MODELS:
                out.append((f"{path.name}:{doc['kind']}", doc))
    return out


@pytest.mark.parametrize(("where", "obj"), builtin_objects(), ids=[w for w, _ in builtin_objects()])
def test_builtin_objects_use_only_known_fields(where: str, obj: dict[str, Any]) -> None:
    problems = unknown_fields(obj, MODELS[(obj["apiVersion"], obj["kind"])], where)
    assert not problems, "\n".join(problems)


def test_every_builtin_kind_expected_is_present() -> None:
    kinds = {obj["kind"] for _, obj in builtin_objects()}
    assert kinds == {kind for _, kind in MODELS}


def test_the_field_check_catches_typos_and_wrong_types() -> None:
    (ds,) = [o for _, o in builtin_objects() if o["kind"] == "DaemonSet"]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"][0]["mountpropagation"] = "HostToContainer"
    container["resources"]["requests"]["cpu"] = 1
    ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "10"
    problems = unknown_fields(ds, "V1DaemonSet", "ds")
    assert any("mountpropagation: unknown field" in p for p in problems)
    assert any("requests.cpu: want str" in p for p in problems)
    assert any("terminationGracePeriodSeconds: want int" in p for p in problems)
