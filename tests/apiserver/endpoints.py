"""The verbs on a resource, after routing: list (paged), get, create, update, patch, delete,
deletecollection, the ``binding``/``eviction``/``token``/``scale`` subresources and the review resources.

Options are read from the query as the real handlers read them (``apiserver/pkg/endpoints/handlers``):
``dryRun=All`` (anything else is a 422 on the options), ``fieldValidation`` (Strict, Warn, Ignore),
``limit``/``continue``, ``resourceVersion``/``resourceVersionMatch``, and DeleteOptions from the body or
the query (``gracePeriodSeconds``, ``preconditions``, ``dryRun``). A create runs admission first
(:mod:`tests.apiserver.admission`), an update (PUT or PATCH) of a pod its update admission. A DELETE
answers 200 with the object (pods, namespaces, custom resources) or a Success Status once the object is
gone, and 202 with the object while graceful deletion or finalizers keep it.

The items of a list (and of a deletecollection's answer) of a built-in type carry no ``kind`` or
``apiVersion``: kube-apiserver encodes a typed list whose items' TypeMeta is empty (client-go's
unstructured decoder fills them in from the list for that reason). Custom resources are unstructured and
keep theirs; a GET and a watch event name the kind either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tests.apiserver import (
    admission,
    binding,
    eviction,
    fieldvalidation,
    reviews,
    services,
    status,
    tokens,
    workloads,
)
from tests.apiserver.resources import ResourceType
from tests.apiserver.status import APIError
from tests.apiserver.writes import DeleteOptions

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

Reply = tuple[int, Any]
_REVIEWS = {
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """One resource request: what it names, its verb, query, decoded body and patch media type."""

    verb: str
    rt: ResourceType
    namespace: str | None
    name: str
    subresource: str
    query: Mapping[str, str]
    body: Any
    content_type: str
    user: Any = None  # the authenticated user (tests.apiserver.auth.User), for reviews


def dry_run(query: Mapping[str, str], options: Mapping[str, Any] | None = None) -> bool:
    values = [query["dryRun"]] if "dryRun" in query else []
    values += list((options or {}).get("dryRun") or [])
    for v in values:
        if v != "All":
            raise status.invalid(
                "CreateOptions",
                "meta.k8s.io",
                "",
                [("dryRun", f'"{v}": supported values: "All"', "NotSupported")],
            )
    return bool(values)


def field_validation(query: Mapping[str, str]) -> str:
    """The ``fieldValidation`` directive (Warn when absent); another value is a 422 on the options."""
    value = query.get("fieldValidation") or fieldvalidation.DEFAULT
    if value not in fieldvalidation.DIRECTIVES:
        supported = ", ".join(f'"{d}"' for d in fieldvalidation.DIRECTIVES)
        raise status.invalid(
            "CreateOptions",
            "meta.k8s.io",
            "",
            [("fieldValidation", f'"{value}": supported values: {supported}', "NotSupported")],
        )
    return value


def _int(query: Mapping[str, str], key: str) -> int | None:
    if query.get(key) in (None, ""):
        return None
    try:
        return int(query[key])
    except ValueError:
        raise status.bad_request(f"{key}: not an integer: {query[key]!r}") from None


def serve(api: APIServer, call: Call) -> Reply:
    rt, sub = call.rt, call.subresource
    if rt.key in _REVIEWS:
        if call.verb != "create":
            raise APIError(405, f"{call.verb} is not supported on {rt.plural}")
        return 201, reviews.review(api, rt, _decoded(call, rt.group, rt.version, rt.kind), call.user)
    if rt.key == ("", "bindings"):
        if call.verb != "create" or call.namespace is None:
            raise APIError(405, f"{call.verb} is not supported on bindings")
        body = _decoded(call, "", "v1", "Binding")
        return 201, binding.bind(api.store, call.namespace, None, body, dry_run=dry_run(call.query))
    found = rt.subresource(sub) if sub else None
    if found is not None and found.verbs == ("create",):
        if call.verb != "create" or not call.name:
            raise APIError(405, f"only POST is allowed on {rt.plural}/{sub}")
        ns, dry = call.namespace or "", dry_run(call.query)
        group = rt.group if found.group is None else found.group
        body = _decoded(call, group, found.version or rt.version, found.kind)
        if sub == "binding":
            return 201, binding.bind(api.store, ns, call.name, body, dry_run=dry)
        if sub == "token":
            return 201, tokens.request(api, ns, call.name, body, dry_run=dry)
        return eviction.evict(api, ns, call.name, body, dry_run=dry)
    if found is not None and sub == "scale":
        if call.verb not in ("get", "update", "patch") or not call.name:
            raise APIError(405, f"{call.verb} is not supported on {rt.plural}/scale")
        return 200, workloads.scale(
            api.store, call.rt, call.namespace or "", call.name, call.verb, call.body, call.content_type
        )
    if sub not in ("", "status") or (sub == "status" and not rt.status_subresource):
        raise APIError(404, "the server could not find the requested resource")
    if rt.namespaced and call.namespace is None and call.name:
        raise APIError(404, "the server could not find the requested resource")
    handler = _VERBS.get(call.verb)
    named = call.verb in ("get", "update", "patch", "delete")
    if handler is None or named != bool(call.name) or (sub and call.verb not in ("get", "update", "patch")):
        raise APIError(405, f"{call.verb} is not supported here")
    return handler(api, call)


def _decoded(call: Call, group: str, version: str, kind: str) -> Any:
    """The body of a create that is not stored as such (a review, a Binding, an Eviction, a
    TokenRequest) decoded as its kind: a value of the wrong type does not decode, unknown fields drop."""
    return fieldvalidation.admit_kind(group, version, kind, call.body, field_validation(call.query))


def _list(api: APIServer, call: Call) -> Reply:
    q = call.query
    page = api.store.list_page(
        call.rt,
        call.namespace,
        field_selector=q.get("fieldSelector"),
        label_selector=q.get("labelSelector"),
        limit=_int(q, "limit"),
        continue_token=q.get("continue") or None,
        resource_version=q.get("resourceVersion"),
        resource_version_match=q.get("resourceVersionMatch"),
    )
    meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    return 200, {
        "kind": call.rt.list_kind,
        "apiVersion": call.rt.api_version,
        "metadata": meta,
        "items": list_items(call.rt, page.items),
    }


def list_items(rt: ResourceType, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` as a list of ``rt`` carries them: without ``kind``/``apiVersion`` for a built-in type."""
    if rt.crd is not None:
        return items
    return [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]


def _get(api: APIServer, call: Call) -> Reply:
    return 200, api.store.get(call.rt, call.name, call.namespace)


def _create(api: APIServer, call: Call) -> Reply:
    if call.rt.namespaced and call.namespace is None:
        raise APIError(404, "the server could not find the requested resource")
    if not isinstance(call.body, dict):
        raise status.bad_request("the body of a create must be an object")
    validation = field_validation(call.query)
    body = fieldvalidation.admit(call.rt, call.body, validation)  # decoding comes before admission
    dry = dry_run(call.query)
    obj = admission.admit_create(api, call.rt, call.namespace, body)
    with api.store.lock:  # allocation and create in one step, so two creates never share an IP
        if call.rt.key == ("", "services"):
            obj = services.allocate(api.store, call.namespace or "", obj)
        created = api.store.create(
            call.rt, obj, call.namespace, keep_status=False, validation=validation, dry_run=dry
        )
    return 201, created


def _update(api: APIServer, call: Call) -> Reply:
    body = call.body
    if not isinstance(body, dict):
        raise status.bad_request("the body of an update must be an object")
    body = fieldvalidation.admit(call.rt, body, field_validation(call.query))  # decoding comes first
    body_name = (body.get("metadata") or {}).get("name")
    if body_name != call.name:
        raise status.bad_request(
            f"the name of the object ({body_name}) does not match the name on the URL ({call.name})"
        )
    dry = dry_run(call.query)
    existed = api.store.exists(call.rt, call.name, call.namespace)
    if not existed and not call.subresource:
        body = admission.admit_create(api, call.rt, call.namespace, body)
    out = api.store.update(
        call.rt,
        body,
        call.namespace,
        subresource=call.subresource or None,
        validation=field_validation(call.query),
        dry_run=dry,
        admit=admission.update_admission(call.rt, call.subresource),
    )
    return (200 if existed else 201), out


def _patch(api: APIServer, call: Call) -> Reply:
    return 200, api.store.patch(
        call.rt,
        call.name,
        call.body,
        call.content_type,
        call.namespace,
        subresource=call.subresource or None,
        validation=field_validation(call.query),
        dry_run=dry_run(call.query),
        admit=admission.update_admission(call.rt, call.subresource),
    )


def _delete_options(call: Call) -> DeleteOptions:
    opts = call.body if isinstance(call.body, dict) else {}
    grace = opts.get("gracePeriodSeconds")
    if grace is None:
        grace = _int(call.query, "gracePeriodSeconds")
    pre = opts.get("preconditions") or {}
    return DeleteOptions(pre.get("uid"), pre.get("resourceVersion"), grace, dry_run(call.query, opts))


def _delete(api: APIServer, call: Call) -> Reply:
    obj, gone = api.store.delete_ex(call.rt, call.name, call.namespace, _delete_options(call))
    if not gone:
        return 202, obj
    if call.rt.delete_returns_object:
        return 200, obj
    details = {
        "name": call.name,
        "group": call.rt.group,
        "kind": call.rt.plural,
        "uid": obj["metadata"]["uid"],
    }
    return 200, status.status_body(200, "", "", details, success=True)


def _delete_collection(api: APIServer, call: Call) -> Reply:
    options = dataclasses.replace(_delete_options(call), uid=None, resource_version=None)
    items, _ = api.store.list(
        call.rt,
        call.namespace,
        field_selector=call.query.get("fieldSelector"),
        label_selector=call.query.get("labelSelector"),
    )
    deleted = []
    for item in items:
        meta = item["metadata"]
        try:
            deleted.append(api.store.delete_ex(call.rt, meta["name"], meta.get("namespace"), options)[0])
        except APIError as err:
            if err.code != 404:  # deleted meanwhile: fine
                raise
    return 200, {
        "kind": call.rt.list_kind,
        "apiVersion": call.rt.api_version,
        "metadata": {},
        "items": list_items(call.rt, deleted),
    }


_VERBS = {
    "list": _list,
    "get": _get,
    "create": _create,
    "update": _update,
    "patch": _patch,
    "delete": _delete,
    "deletecollection": _delete_collection,
}
