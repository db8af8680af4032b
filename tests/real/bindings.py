"""The refusals of ``pods/<name>/binding`` asked of an API server through the project's request helper: a
pod with scheduling gates, one already bound, one being deleted, a Binding naming another pod. Run against
kube-apiserver (the real tier) and the test API server (unit tests), the answers must be the same."""

from __future__ import annotations

from typing import Any

from koordshared.kube.client import ApiError, request

PREFIX = "bindcheck"
NOBODY = "no-scheduler"
"""No scheduler serves this name, so none binds the test's pods while it asks."""
HOLD = "example.com/hold"
"""The scheduling gate of one pod and the finalizer of another."""

Answer = tuple[int, str, str]


def _pod(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **spec.pop("meta", {})},
        "spec": {"schedulerName": NOBODY, "containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def _bind(api: Any, ns: str, url_name: str, name: str) -> Answer:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": "nowhere"},
    }
    try:
        request(api, "bind", "POST", f"/api/v1/namespaces/{ns}/pods/{url_name}/binding", body=body)
    except ApiError as err:
        return err.status, err.reason, err.message
    return 201, "", ""


def refusals(api: Any, ns: str) -> dict[str, Answer]:
    """Each case's (code, reason, message); the pods made for them are deleted before returning."""
    pods = f"/api/v1/namespaces/{ns}/pods"
    gated, bound, leaving = (f"{PREFIX}-{case}" for case in ("gated", "bound", "leaving"))
    made = []
    try:
        for obj in (
            _pod(gated, ns, schedulingGates=[{"name": HOLD}]),
            _pod(bound, ns, nodeName="nowhere"),
            _pod(leaving, ns, meta={"finalizers": [HOLD]}),
        ):
            request(api, "create", "POST", pods, body=obj)
            made.append(obj["metadata"]["name"])
        request(api, "delete", "DELETE", f"{pods}/{leaving}")
        return {
            "gated": _bind(api, ns, gated, gated),
            "bound": _bind(api, ns, bound, bound),
            "leaving": _bind(api, ns, leaving, leaving),
            "other name": _bind(api, ns, gated, bound),
        }
    finally:
        for name in made:
            if name == leaving:
                patch = {"metadata": {"finalizers": None}}
                merge = "application/merge-patch+json"
                request(api, "release", "PATCH", f"{pods}/{name}", body=patch, content_type=merge)
            try:
                request(api, "clean up", "DELETE", f"{pods}/{name}", body={"gracePeriodSeconds": 0})
            except ApiError as err:
                if not err.not_found:
                    raise
