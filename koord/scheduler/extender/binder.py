"""The API binding the extender makes for ``/bind``: ``POST pods/<name>/binding``, as kube-scheduler's
DefaultBinder does, with the pod's UID as a precondition so a re-created pod of the same name is never
bound by mistake.
"""

from __future__ import annotations

from typing import Any, Protocol

from koordshared.apis.core.pod import binding
from koordshared.kube.client import ApiError, request
from koordshared.runtime.errors import APIUnavailable


class BindFailed(Exception):
    """The binding did not happen (the message is the API server's, for kube-scheduler's log)."""


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind or raise :class:`BindFailed`."""


class APIBinder:
    def __init__(self, api_client: Any, timeout: float) -> None:
        self._api = api_client
        self._timeout = timeout

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        path, body = binding(namespace, name, uid, node)
        try:
            request(
                self._api,
                f"bind {namespace}/{name} to {node}",
                "POST",
                path,
                body=body,
                timeout=self._timeout,
            )
        except (ApiError, APIUnavailable) as err:
            raise BindFailed(str(err)) from err
