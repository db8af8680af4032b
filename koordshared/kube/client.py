"""The Kubernetes client shared by the cluster processes and the agent: construction and error mapping.

:func:`make_client` gives a :class:`~koordshared.kube.transport.LeanClient` where the credentials allow
(no ``kubernetes`` import: most of a start), else an official ``ApiClient`` (``make_api_client``: also
from an explicit ``Configuration``). Requests go on REST paths (:func:`send`; never the typed API
classes) and JSON is decoded here, so objects travel as plain dicts. :func:`call` turns the many failure
types into two: :class:`ApiError` (the server answered non-2xx) and
:class:`~koordshared.runtime.errors.APIUnavailable` (it could not be reached). :func:`throttle` holds a
client to a token bucket (clientConnection qps/burst). :func:`listed_items` gives the items of a list
answer the kind kube-apiserver leaves out of them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from koordshared.kube import kubeconfig
from koordshared.kube.ratelimit import TokenBucket
from koordshared.kube.transport import LeanClient, StatusError, transport_of
from koordshared.runtime.errors import APIUnavailable, ConfigError


def in_cluster_available() -> bool:
    """Whether the in-cluster service-account configuration can be used (``KUBERNETES_SERVICE_HOST``)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def make_api_client(kubeconfig: str = "", client_configuration: Any = None, *, user_agent: str = "") -> Any:
    """An ``ApiClient`` from an explicit ``kubernetes.client.Configuration`` (tests), a kubeconfig file,
    or the in-cluster service account; :class:`ConfigError` when none works."""
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config
    if client_configuration is not None:
        api_client = client.ApiClient(client_configuration)
    else:
        try:
            if kubeconfig:
                api_client = config.new_client_from_config(config_file=kubeconfig)
            else:
                cfg = client.Configuration()
                config.load_incluster_config(client_configuration=cfg)
                api_client = client.ApiClient(cfg)
        except (config.ConfigException, OSError) as err:
            raise ConfigError(f"no usable cluster credentials: {err}") from err
    if user_agent:
        api_client.user_agent = user_agent
    return api_client


def make_client(kubeconfig_path: str = "", *, user_agent: str = "") -> Any:
    """A :class:`LeanClient` of the kubeconfig's current context (``""``: the in-cluster service
    account), or an official ``ApiClient`` when the kubeconfig needs one (an exec plugin, a proxy...);
    :class:`ConfigError` naming what is wrong."""
    endpoint = kubeconfig.from_kubeconfig(kubeconfig_path) if kubeconfig_path else kubeconfig.in_cluster()
    if endpoint is None:
        return make_api_client(kubeconfig_path, user_agent=user_agent)
    return LeanClient(endpoint, user_agent=user_agent, source=kubeconfig_path)


def official_client(api_client: Any) -> Any:
    """The official ``ApiClient`` of ``api_client`` (for the typed API classes): itself, or for a
    :class:`LeanClient` one made on first use from the same credentials, closed with it."""
    if not isinstance(api_client, LeanClient):
        return api_client
    if api_client.official is None:
        api_client.official = make_api_client(api_client.source, user_agent=api_client.user_agent)
    return api_client.official


def throttle(api_client: Any, bucket: TokenBucket, sleep: Callable[[float], None] = time.sleep) -> None:
    """Every request of ``api_client`` waits for a token of ``bucket`` first (client-go's
    ``tokenBucketRateLimiter`` on a clientset: lists, watches and writes alike). The client's
    ``call_api`` is the one door every request goes through, typed calls and :func:`request`'s, so the
    bucket wraps it on this client only, and the lean transport's requests (:func:`send`) take their
    tokens from it too; another client keeps its own pace."""
    api_client._koord_throttle = (bucket, sleep)  # the lean transport's requests wait too
    if isinstance(api_client, LeanClient):
        return
    send = api_client.call_api

    def call_api(*args: Any, **kwargs: Any) -> Any:
        _wait_token(bucket, sleep)
        return send(*args, **kwargs)

    api_client.call_api = call_api


def _wait_token(bucket: TokenBucket, sleep: Callable[[float], None]) -> None:
    delay = bucket.reserve()
    if delay > 0:
        sleep(delay)


def close_client(api_client: Any) -> None:
    """Close the client's connections, its lean transport's included."""
    if isinstance(api_client, LeanClient):
        api_client.close()
        return
    slot = getattr(api_client, "_koord_transport", None)
    if slot is not None and slot[0] is not None:
        slot[0].close()
    api_client.close()


def twin_client(api_client: Any) -> Any:
    """A second ``ApiClient`` on the same configuration (server, credentials, user agent) with its own
    connections, so a limit set on one does not hold the other's requests (kube-scheduler's Events go
    through a clientset of their own)."""
    if isinstance(api_client, LeanClient):
        return api_client.twin()
    from kubernetes import client

    twin = client.ApiClient(api_client.configuration)
    twin.user_agent = api_client.user_agent
    return twin


class ApiError(Exception):
    """The API server answered with a non-2xx status (``status``, and ``reason`` and ``message`` from its
    Status)."""

    def __init__(self, what: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{what}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


def _api_error(what: str, err: Any) -> ApiError:
    status = getattr(err, "status", 0)
    status = status if isinstance(status, int) else 0
    reason, message = str(getattr(err, "reason", "") or ""), ""
    body = getattr(err, "body", None)
    if body:
        try:
            doc = json.loads(body)
            reason = str(doc.get("reason") or reason)
            message = str(doc.get("message") or "")
        except (ValueError, AttributeError):
            message = str(body)[:200]
    return ApiError(what, status, reason, message)


def request(
    api_client: Any,
    what: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Mapping[str, str] | None = None,
    timeout: float | tuple[float, float] | None = None,
    content_type: str = "application/json",
) -> Any:
    """A JSON request on ``path`` sent exactly as given: the typed methods of kubernetes >= 37 rebuild a
    dict body through their models (a Lease's MicroTime ``...00.000000Z`` comes out as ``...00+00:00``,
    which kube-apiserver refuses), so writes whose wire format matters go through here. Errors as
    :func:`call`."""
    return call(
        what,
        lambda: send(
            api_client, method, path, body=body, query=query, timeout=timeout, content_type=content_type
        ),
    )


def send(
    api_client: Any,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Mapping[str, str] | None = None,
    timeout: float | tuple[float, float] | None = None,
    content_type: str = "application/json",
    stream: bool = False,
) -> Any:
    """The response of a request on ``path`` (``.status``, ``.data``), without the typed API classes
    (importing ``CoreV1Api`` builds hundreds of models: most of a process's start). A whole answer goes
    through the lean :mod:`~koordshared.kube.transport` where the configuration allows; ``stream``: the
    body is left unread (a list to decode, a watch to follow) on the generated client's connection. A
    non-2xx answer raises the client's ``ApiException``, as the typed calls do (on a
    :class:`LeanClient`, whose every request is lean, a :class:`StatusError`)."""
    headers = {"Accept": "application/json", "Content-Type": content_type}
    if isinstance(api_client, LeanClient):
        return _send_lean(api_client, method, path, body, query, timeout, headers, stream)
    transport = None if stream else transport_of(api_client)
    if transport is not None:
        limit = getattr(api_client, "_koord_throttle", None)
        if limit is not None:
            _wait_token(*limit)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        resp: Any = transport.request(method, path, body=data, query=query, headers=headers, timeout=timeout)
        if not 200 <= resp.status <= 299:
            from kubernetes.client.exceptions import ApiException

            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp
    params = list((query or {}).items())
    if hasattr(api_client, "param_serialize"):  # the pydantic-based generator (kubernetes >= 37)
        req = api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(*req, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            from kubernetes.client.exceptions import ApiException

            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response
    return api_client.call_api(  # the legacy generator
        path,
        method,
        query_params=params,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=timeout,
    )


def _send_lean(
    client: LeanClient,
    method: str,
    path: str,
    body: Any,
    query: Mapping[str, str] | None,
    timeout: float | tuple[float, float] | None,
    headers: Mapping[str, str],
    stream: bool,
) -> Any:
    limit = getattr(client, "_koord_throttle", None)
    if limit is not None:
        _wait_token(*limit)
    resp: Any
    if stream:
        resp = client.transport.open(method, path, query=query, headers=headers, timeout=timeout)
    else:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        resp = client.transport.request(
            method, path, body=data, query=query, headers=headers, timeout=timeout
        )
    if not 200 <= resp.status <= 299:
        answer = resp.data
        if stream:
            resp.release_conn()
        raise StatusError(resp.status, resp.reason, answer)
    return resp


def status_of(err: BaseException) -> int | None:
    """The HTTP status of an error that is the server's answer (either client's), else ``None``."""
    if isinstance(err, StatusError) or _is_api_exception(err):
        status = getattr(err, "status", 0)
        return status if isinstance(status, int) else 0
    return None


def _is_api_exception(err: BaseException) -> bool:
    # Only a loaded official client raises its ApiException: a lean process never imports it for this.
    exceptions = sys.modules.get("kubernetes.client.exceptions")
    return exceptions is not None and isinstance(err, exceptions.ApiException)


def call(what: str, fn: Callable[[], Any]) -> Any:
    """Run one client call; its response body decoded as JSON (``None`` when empty).

    ``fn`` must pass ``_preload_content=False``. Raises :class:`ApiError` for a non-2xx answer and
    :class:`APIUnavailable` when the server could not be reached (connection errors, timeouts).
    """
    try:
        resp = fn()
        data = resp.data
    except Exception as err:  # urllib3, socket and ssl errors alike: the server is unreachable
        if status_of(err) is not None:
            raise _api_error(what, err) from err
        raise APIUnavailable(f"{what}: {err}") from err
    return json.loads(data) if data else None


def listed_items(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The items of a list answer, each naming its kind and apiVersion: kube-apiserver leaves them out of
    the items of a built-in type's list (watch events and GETs carry them), so they are taken from the
    list's, as client-go's unstructured decoder does (``decodeToList``). Readers (an Event's reference
    above all) then see the same object whether it was listed or watched."""
    kind = str(doc.get("kind") or "").removesuffix("List")
    api_version = doc.get("apiVersion")
    items = [i for i in doc.get("items") or () if isinstance(i, Mapping)]
    if not kind or not api_version:
        return items
    return [
        i if i.get("kind") or i.get("apiVersion") else {"kind": kind, "apiVersion": api_version, **i}
        for i in items
    ]
