"""TokenReview, SubjectAccessReview and SelfSubjectAccessReview: how a component asks the API server who
a bearer token is and what it may do (``pkg/registry/authentication/tokenreview/storage.go``,
``pkg/registry/authorization/subjectaccessreview/rest.go``, ``.../selfsubjectaccessreview/rest.go``);
SelfSubjectReview (``kubectl auth whoami``: the caller's user info, ``.../selfsubjectreview/rest.go``) and
SelfSubjectRulesReview (``kubectl auth can-i --list``: the RBAC rules that apply to the caller in a
namespace, ``.../selfsubjectrulesreview/rest.go``; a 400 without ``spec.namespace``).

The answer is the review with its ``status`` filled in (201). A TokenReview is answered whatever the
authorization mode. An access review is answered by the authorizer that decides the server's own
requests, as kube-apiserver's review endpoints are: RBAC (:mod:`tests.apiserver.rbac`) when authorization
is on; with it off every request is allowed, so every review says allowed and the rules review lists
``*`` (kube-apiserver's ``AlwaysAllow`` mode), and ``kubectl auth can-i`` says yes to what the server
then does. A SubjectAccessReview must name a user or a group and exactly one of resource or
non-resource attributes (422 otherwise).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tests.apiserver import status
from tests.apiserver.rbac import ANONYMOUS, User
from tests.apiserver.requestinfo import RequestInfo
from tests.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

Obj = dict[str, Any]
DEFAULT_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]
# What AlwaysAllow's RulesFor gives (apiserver ``authorizerfactory/builtin.go``).
ALWAYS_ALLOW = (
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
)


def review(api: APIServer, rt: ResourceType, body: Any, caller: User | None) -> Obj:
    if not isinstance(body, dict):
        raise status.bad_request(f"the body of a {rt.kind} must be an object")
    if rt.plural == "selfsubjectreviews":  # no spec: the caller is the subject
        answer: Obj = {**copy.deepcopy(body), "apiVersion": rt.api_version, "kind": rt.kind}
        answer["status"] = {"userInfo": (caller or ANONYMOUS).as_user_info()}
        return answer
    if not isinstance(body.get("spec"), dict):
        raise status.bad_request(f"a {rt.kind} needs a spec")
    out = copy.deepcopy(body)
    out["apiVersion"], out["kind"] = rt.api_version, rt.kind
    spec = out["spec"]
    if rt.plural == "tokenreviews":
        user = api.auth.user_of(str(spec.get("token") or ""))
        if user is None:
            out["status"] = {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        else:
            audiences = spec.get("audiences") or DEFAULT_AUDIENCES
            out["status"] = {"authenticated": True, "user": user.as_user_info(), "audiences": audiences}
        return out
    if rt.plural == "selfsubjectrulesreviews":
        return _rules_review(api, out, caller or ANONYMOUS)
    if rt.plural == "selfsubjectaccessreviews":
        who = caller or ANONYMOUS
    else:
        if not spec.get("user") and not spec.get("groups"):
            raise status.invalid(
                rt.kind,
                rt.group,
                "",
                [("spec.user", "at least one of user or group must be specified", "Invalid")],
            )
        extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
        who = User(spec.get("user") or "", spec.get("uid") or "", tuple(spec.get("groups") or ()), extra)
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        why = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        raise status.invalid(rt.kind, rt.group, "", [("spec.resourceAttributes", why, "Invalid")])
    if res is not None:
        attrs = RequestInfo(
            "",
            res.get("verb", ""),
            True,
            res.get("group", ""),
            res.get("version", ""),
            res.get("resource", ""),
            res.get("subresource", ""),
            res.get("namespace", ""),
            res.get("name", ""),
        )
    else:
        attrs = RequestInfo(non.get("path", ""), non.get("verb", ""))
    allowed, reason = api.auth.authorizer.allowed(who, attrs) if api.auth.authorization else (True, "")
    out["status"] = {"allowed": allowed, "reason": reason} if reason else {"allowed": allowed}
    return out


def _rules_review(api: APIServer, out: Obj, who: User) -> Obj:
    namespace = out["spec"].get("namespace")
    if not namespace:
        raise status.bad_request("no namespace on request")
    resource_rules, non_resource_rules = [], []
    rules = api.auth.authorizer.rules_for(who, str(namespace)) if api.auth.authorization else ALWAYS_ALLOW
    for rule in rules:
        verbs = list(rule.get("verbs") or ())
        if rule.get("nonResourceURLs"):
            non_resource_rules.append({"verbs": verbs, "nonResourceURLs": list(rule["nonResourceURLs"])})
        else:
            entry = {
                "verbs": verbs,
                **{k: list(rule[k]) for k in ("apiGroups", "resources", "resourceNames") if rule.get(k)},
            }
            resource_rules.append(entry)
    out["status"] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
    return out
