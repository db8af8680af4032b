"""Writes to the real kube-apiserver as our components send them (the same REST calls, bodies and content
types, through the project's own request helper) but with ``fieldValidation=Strict``, so a field the
server does not know is refused instead of silently dropped; and reads back what it stored."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from koordshared.apis.meta.groups import NODE_RESOURCE_TOPOLOGIES
from koordshared.kube.client import ApiError, make_api_client, request

MERGE_PATCH = "application/merge-patch+json"
Obj = dict[str, Any]


class StrictAPI:
    def __init__(self, kubeconfig: Path) -> None:
        self.client = make_api_client(str(kubeconfig), user_agent="koordlet-tests/deploy")

    def write(
        self, method: str, path: str, body: Mapping[str, Any], content_type: str = "application/json"
    ) -> Obj:
        """POST, PUT or PATCH ``body`` with strict field validation; the object as stored."""
        out: Obj = request(
            self.client,
            f"{method} {path}",
            method,
            path,
            body=dict(body),
            query={"fieldValidation": "Strict"},
            content_type=content_type,
            timeout=30,
        )
        return out

    def get(self, path: str) -> Obj:
        out: Obj = request(self.client, f"GET {path}", "GET", path, timeout=30)
        return out

    def get_or_none(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def delete(self, path: str) -> None:
        try:
            request(self.client, f"DELETE {path}", "DELETE", path, timeout=30)
        except ApiError as err:
            if not err.not_found:
                raise


def merged(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386): what the server should store."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def written_part(obj: Mapping[str, Any]) -> Obj:
    """What a writer sets in an object: everything but the server's metadata, and of the metadata the
    labels, annotations and owner references (an empty map and no map are the same to the server)."""
    meta = obj.get("metadata") or {}
    out = {k: v for k, v in obj.items() if k != "metadata"}
    out["metadata"] = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace", ""),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "ownerReferences": meta.get("ownerReferences") or [],
    }
    return out


class TopologySinkToServer:
    """The agent's NodeResourceTopology writes (``ClusterAPI.write_node_topology``: a create, or a replace
    at the read resourceVersion), sent strictly; each body kept for the comparison."""

    def __init__(self, api: StrictAPI, name: str) -> None:
        self.api = api
        self.path = NODE_RESOURCE_TOPOLOGIES.path(name)
        self.sent: list[tuple[bool, Obj]] = []

    def write_node_topology(self, body: Mapping[str, Any], *, create: bool) -> int:
        self.sent.append((create, copy.deepcopy(dict(body))))
        if create:
            self.api.write("POST", NODE_RESOURCE_TOPOLOGIES.path(), body)
            return 201
        self.api.write("PUT", self.path, body)
        return 200

    def current(self) -> Obj | None:
        return self.api.get_or_none(self.path)
