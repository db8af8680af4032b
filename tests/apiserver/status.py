"""``metav1.Status`` bodies and the error type of the test API server.

Messages and reasons follow kube-apiserver's wording (``pods "x" not found``, ``Operation cannot be
fulfilled on ...``), so client code that inspects ``ApiException.reason`` or the body behaves as in a
cluster.
"""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None, *, success: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    if success:
        del body["reason"]
        del body["message"]
    return body


class APIError(Exception):
    """An API failure answered as a ``Status`` with ``code``; ``headers`` adds e.g. ``Retry-After``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return status_body(self.code, self.reason, self.message, self.details)


def _details(plural: str, group: str, name: str) -> dict[str, Any]:
    return {"name": name, "group": group, "kind": plural}


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> APIError:
    return APIError(
        404, f'{_qualified(plural, group)} "{name}" not found', details=_details(plural, group, name)
    )


def already_exists(plural: str, group: str, name: str) -> APIError:
    return APIError(
        409,
        f'{_qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(plural, group, name),
    )


def conflict(plural: str, group: str, name: str, why: str) -> APIError:
    return APIError(
        409,
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        details=_details(plural, group, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> APIError:
    what = f"{kind}.{group}" if group else kind
    text = ", ".join(f"{field}: Invalid value: {message}" for field, message in causes)
    details = {
        "name": name,
        "group": group,
        "kind": kind,
        "causes": [
            {"reason": "FieldValueInvalid", "message": f"Invalid value: {message}", "field": field}
            for field, message in causes
        ],
    }
    return APIError(422, f'{what} "{name}" is invalid: {text}', details=details)


def gone(requested: int, oldest: int) -> APIError:
    return APIError(410, f"too old resource version: {requested} ({oldest})")


def bad_request(message: str) -> APIError:
    return APIError(400, message)


def internal(message: str) -> APIError:
    return APIError(500, f"Internal error occurred: {message}")
