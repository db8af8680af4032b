"""``apps/v1`` Deployments and DaemonSets as stored objects, and the ``deployments/scale`` subresource.

Strategies written from ``pkg/registry/apps/deployment/strategy.go`` and ``.../daemonset/strategy.go``
with the defaults of ``pkg/apis/apps/v1/defaults.go``: a Deployment gets 1 replica, a RollingUpdate
strategy with 25 % maxUnavailable and maxSurge, 10 kept revisions and a 600 s progress deadline; a
DaemonSet a RollingUpdate strategy with maxUnavailable 1 and maxSurge 0 and 10 kept revisions; the pod
template is defaulted as a pod is (:mod:`tests.apiserver.podspec`). Validation (``ValidateDeployment``,
``ValidateDaemonSet``): a non-empty selector that matches the template's labels, a template whose pods
restart Always and have valid containers, no negative replicas; on update the selector is immutable. A
create starts from an empty status (a DaemonSet's counters at 0).

No controller runs: nothing creates pods or ReplicaSets and the status stays as written (a test writes
it through the status subresource). ``deployments/scale`` (``autoscaling/v1`` Scale) reads and writes
``spec.replicas`` as ``ScaleREST`` does, with the selector as a string.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver import fieldvalidation, patch, podspec, status
from tests.apiserver.resources import ResourceType
from tests.apiserver.selectors import label_selector
from tests.apiserver.status import Cause
from tests.apiserver.store import Store
from tests.apiserver.strategy import Strategy

Obj = dict[str, Any]
_TEMPLATE_QUANTITIES = tuple(
    ("spec", "template", *path)
    for path in (
        ("spec", f, "*", "resources", k, "*") for f in podspec.CONTAINER_LISTS for k in ("requests", "limits")
    )
)


def _template_defaults(obj: Obj) -> None:
    template = obj.setdefault("spec", {}).get("template")
    if isinstance(template, dict):
        podspec.set_defaults(template)


def _rolling(strategy: Obj, unavailable: int | str, surge: int | str) -> None:
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", unavailable)
        rolling.setdefault("maxSurge", surge)


def _template_errors(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    selector = spec.get("selector")
    reqs = label_selector(selector)
    if not selector:
        out.append(("spec.selector", "", "Required"))
    elif reqs is None:
        out.append(("spec.selector", "not a valid label selector"))
    elif not reqs:
        out.append(("spec.selector", f"empty selector is invalid for {obj.get('kind', 'this kind').lower()}"))
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if reqs and not all(r.matches(labels) for r in reqs):
        out.append(
            ("spec.template.metadata.labels", f"{labels}: `selector` does not match template `labels`")
        )
    tspec = template.get("spec") or {}
    if tspec.get("restartPolicy") not in (None, "Always"):
        why = f'"{tspec["restartPolicy"]}": supported values: "Always"'
        out.append(("spec.template.spec.restartPolicy", why, "NotSupported"))
    for cause in podspec.create_errors({"spec": tspec}):
        out.append((f"spec.template.{cause[0]}", *cause[1:]))
    return out


def _selector_unchanged(new: Obj, old: Obj) -> list[Cause]:
    if (new.get("spec") or {}).get("selector") != (old.get("spec") or {}).get("selector"):
        return [("spec.selector", "field is immutable")]
    return []


class DeploymentStrategy(Strategy):
    """``pkg/registry/apps/deployment/strategy.go``."""

    quantities = _TEMPLATE_QUANTITIES

    def defaults(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        _rolling(spec.setdefault("strategy", {}), "25%", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        _template_defaults(obj)

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        if not keep_status or not isinstance(obj.get("status"), dict):
            obj["status"] = {}

    def validate(self, obj: Obj) -> list[Cause]:
        out = _template_errors(obj)
        replicas = (obj.get("spec") or {}).get("replicas")
        if isinstance(replicas, int) and replicas < 0:
            out.append(("spec.replicas", f"{replicas}: must be greater than or equal to 0"))
        return out

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return [] if subresource else self.validate(new) + _selector_unchanged(new, old)


class DaemonSetStrategy(Strategy):
    """``pkg/registry/apps/daemonset/strategy.go``."""

    quantities = _TEMPLATE_QUANTITIES

    def defaults(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        _rolling(spec.setdefault("updateStrategy", {}), 1, 0)
        spec.setdefault("revisionHistoryLimit", 10)
        _template_defaults(obj)

    def prepare_for_create(self, obj: Obj, *, keep_status: bool) -> None:
        if not keep_status or not isinstance(obj.get("status"), dict):
            obj["status"] = {
                "currentNumberScheduled": 0,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 0,
                "numberReady": 0,
            }

    def validate(self, obj: Obj) -> list[Cause]:
        return _template_errors(obj)

    def validate_update(self, new: Obj, old: Obj, subresource: str | None) -> list[Cause]:
        return [] if subresource else self.validate(new) + _selector_unchanged(new, old)


def selector_string(selector: Any) -> str:
    """``metav1.LabelSelectorAsSelector(...).String()``: requirements sorted by key."""
    terms = []
    for r in sorted(label_selector(selector) or (), key=lambda r: r.key):
        values = ",".join(sorted(r.values))
        terms.append(
            {
                "=": f"{r.key}={values}",
                "!=": f"{r.key}!={values}",
                "in": f"{r.key} in ({values})",
                "notin": f"{r.key} notin ({values})",
                "exists": r.key,
                "!exists": f"!{r.key}",
            }[r.op]
        )
    return ",".join(terms)


def _as_scale(deployment: Obj) -> Obj:
    meta = deployment["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": (deployment.get("spec") or {}).get("replicas", 0)},
        "status": {
            "replicas": (deployment.get("status") or {}).get("replicas", 0),
            "selector": selector_string((deployment.get("spec") or {}).get("selector")),
        },
    }


def scale(
    store: Store, rt: ResourceType, namespace: str, name: str, verb: str, body: Any, content_type: str
) -> Obj:
    """GET, PUT or PATCH ``<name>/scale``: the Scale view of the object, after the write if any."""
    with store.lock:
        current = store.get(rt, name, namespace)
        if verb == "get":
            return _as_scale(current)
        view = _as_scale(current)
        wanted = body if verb == "update" else patch.apply(view, body, content_type)
        wanted = fieldvalidation.admit_kind("autoscaling", "v1", "Scale", wanted, "Ignore")
        if not isinstance(wanted, dict) or not isinstance(wanted.get("spec"), dict):
            raise status.bad_request("the body of a Scale must be an object with a spec")
        replicas = wanted["spec"].get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise status.invalid(
                "Scale",
                "autoscaling",
                name,
                [("spec.replicas", f"{replicas!r}: must be greater than or equal to 0")],
            )
        given_rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if verb == "update" and given_rv and str(given_rv) != current["metadata"]["resourceVersion"]:
            raise status.conflict(rt.plural, rt.group, name, status.STALE)
        updated = copy.deepcopy(current)
        updated["spec"]["replicas"] = replicas
        return _as_scale(store.update(rt, updated, namespace))
