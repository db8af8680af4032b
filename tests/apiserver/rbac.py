"""RBAC as kube-apiserver's authorizer evaluates it (``plugin/pkg/auth/authorizer/rbac/rbac.go``
``VisitRulesFor``, ``pkg/apis/rbac/v1/evaluation_helpers.go`` ``RuleAllows``).

A request is allowed when a rule reached from the user's bindings matches it: ClusterRoleBindings grant
their ClusterRole everywhere, RoleBindings grant a Role (or ClusterRole) in their namespace; subjects are
Users, Groups and ServiceAccounts. A rule matches by verb, API group and resource (``*`` anywhere,
``pods/eviction`` for a subresource, ``*/status`` for every status), by ``resourceNames`` when it lists
any, and non-resource URLs by path (``/healthz``, a ``/prefix/*``). Members of ``system:masters`` are
always allowed. The bootstrap roles every cluster has (``plugin/pkg/auth/authorizer/rbac/
bootstrappolicy``) are built in: discovery and the health/version paths for everyone, the self reviews
(access, rules, who-am-I) for authenticated users, ``system:auth-delegator`` (TokenReview/
SubjectAccessReview) and ``cluster-admin``. Aggregated ClusterRoles (``aggregationRule``) are not assembled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from tests.apiserver.requestinfo import RequestInfo

Obj = dict[str, Any]
Rule = Mapping[str, Any]
SUPERUSER_GROUP = "system:masters"
AUTHENTICATED, UNAUTHENTICATED = "system:authenticated", "system:unauthenticated"


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def as_user_info(self) -> Obj:
        out: Obj = {"username": self.name, "uid": self.uid, "groups": list(self.groups)}
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS = User("system:anonymous", groups=(UNAUTHENTICATED,))

BOOTSTRAP_ROLES: dict[str, list[Rule]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "system:discovery": [
        {
            "nonResourceURLs": [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/openapi",
                "/openapi/*",
                "/version",
                "/version/",
            ],
            "verbs": ["get"],
        }
    ],
    "system:public-info-viewer": [
        {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}
    ],
    "system:basic-user": [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ],
    "system:auth-delegator": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ],
}
BOOTSTRAP_BINDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cluster-admin", (SUPERUSER_GROUP,)),
    ("system:discovery", (AUTHENTICATED,)),
    ("system:basic-user", (AUTHENTICATED,)),
    ("system:public-info-viewer", (AUTHENTICATED, UNAUTHENTICATED)),
)


def describe(a: RequestInfo) -> str:
    """What was refused, in kube-apiserver's words."""
    if not a.is_resource:
        return f'{a.verb} path "{a.path}"'
    res = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    return f'{a.verb} resource "{res}" in API group "{a.group}" {where}'


def _subject_matches(subject: Mapping[str, Any], user: User, namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return user.name == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


def rule_allows(rule: Rule, a: RequestInfo) -> bool:
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and a.verb not in verbs:
        return False
    if not a.is_resource:
        return any(
            u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1]))
            for u in rule.get("nonResourceURLs") or ()
        )
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and a.group not in groups:
        return False
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = rule.get("resources") or ()
    if not any(r in ("*", combined) or (a.subresource and r == f"*/{a.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or ()
    return not names or a.name in names


class Authorizer:
    """Evaluates RBAC objects taken from ``list_objects(resource)`` (the store's RBAC types)."""

    def __init__(self, list_objects: Any) -> None:
        self._list = list_objects

    def _role_rules(self, kind: str, name: str, namespace: str) -> list[Rule]:
        if kind == "Role":
            found = [
                r
                for r in self._list("roles.rbac.authorization.k8s.io", namespace)
                if r["metadata"]["name"] == name
            ]
        else:
            found = [
                r
                for r in self._list("clusterroles.rbac.authorization.k8s.io", None)
                if r["metadata"]["name"] == name
            ]
            if not found and name in BOOTSTRAP_ROLES:
                return BOOTSTRAP_ROLES[name]
        return list(found[0].get("rules") or ()) if found else []

    def rules_for(self, user: User, namespace: str) -> Iterable[Rule]:
        for role, groups in BOOTSTRAP_BINDINGS:
            if set(groups) & set(user.groups):
                yield from BOOTSTRAP_ROLES[role]
        for binding in self._list("clusterrolebindings.rbac.authorization.k8s.io", None):
            if any(_subject_matches(s, user, "") for s in binding.get("subjects") or ()):
                ref = binding.get("roleRef") or {}
                yield from self._role_rules("ClusterRole", ref.get("name", ""), "")
        if not namespace:
            return
        for binding in self._list("rolebindings.rbac.authorization.k8s.io", namespace):
            if any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or ()):
                ref = binding.get("roleRef") or {}
                yield from self._role_rules(ref.get("kind", "Role"), ref.get("name", ""), namespace)

    def allowed(self, user: User, a: RequestInfo) -> tuple[bool, str]:
        if SUPERUSER_GROUP in user.groups:
            return True, ""
        for rule in self.rules_for(user, a.namespace if a.is_resource else ""):
            if rule_allows(rule, a):
                return True, "allowed by RBAC"
        return False, ""
