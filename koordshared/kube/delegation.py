"""Delegated authentication and authorization: TokenReview and SubjectAccessReview through the API client.

The :class:`~koordshared.runtime.httpaccess.Reviewer` of a process that serves HTTP with
``--authentication-token-webhook`` (the agent, and any cluster process): the same two calls the kubelet
and kube-rbac-proxy make, which need ``create`` on ``tokenreviews`` (authentication.k8s.io) and
``subjectaccessreviews`` (authorization.k8s.io), i.e. the ``system:auth-delegator`` ClusterRole. A token
is never logged; an API server that cannot answer raises :class:`~koordshared.runtime.errors.APIUnavailable`.
"""

from __future__ import annotations

from typing import Any

from koordshared.kube.client import ApiError, make_api_client, make_client, request
from koordshared.runtime.errors import APIUnavailable
from koordshared.runtime.httpaccess import AuthConfig, DelegatingAuth, UserInfo

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class APIReviewer:
    """Reviews callers with the API server ``api_client`` talks to, each call bounded by ``timeout``."""

    def __init__(self, api_client: Any, *, timeout: float = 5.0, audiences: tuple[str, ...] = ()) -> None:
        self._api = api_client
        self._timeout = timeout
        self._audiences = audiences

    def _post(self, what: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            out = request(self._api, what, "POST", path, body=body, timeout=self._timeout)
        except ApiError as err:  # e.g. 403: the process lacks system:auth-delegator
            raise APIUnavailable(str(err)) from err
        if not isinstance(out, dict) or not isinstance(out.get("status"), dict):
            raise APIUnavailable(f"{what}: the answer has no status")
        status: dict[str, Any] = out["status"]
        return status

    def authenticate(self, token: str) -> UserInfo | None:
        spec: dict[str, Any] = {"token": token}
        if self._audiences:
            spec["audiences"] = list(self._audiences)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        status = self._post("TokenReview", TOKEN_REVIEWS, body)
        user = status.get("user") or {}
        if not status.get("authenticated") or not isinstance(user, dict) or not user.get("username"):
            return None
        extra = user.get("extra") or {}
        return UserInfo(
            name=str(user["username"]),
            uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra={str(k): tuple(str(x) for x in v) for k, v in extra.items() if isinstance(v, list)},
        )

    def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return bool(self._post("SubjectAccessReview", ACCESS_REVIEWS, body).get("allowed"))


def delegating_auth(
    config: AuthConfig, kubeconfig: str = "", client_configuration: Any = None, *, user_agent: str
) -> DelegatingAuth:
    """The request filter of a process serving HTTP with authentication on, reviewing through its own
    client (an explicit ``client_configuration``; else the kubeconfig's or the in-cluster service
    account's, lean where the credentials allow: the agent's DaemonSet reviews its scrapers and must not
    import ``kubernetes`` for it) under the process's ``user_agent``."""
    if client_configuration is not None:
        api = make_api_client(client_configuration=client_configuration, user_agent=user_agent)
    else:
        api = make_client(kubeconfig, user_agent=user_agent)
    return DelegatingAuth(config, APIReviewer(api))
