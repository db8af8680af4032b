"""TokenReview and SubjectAccessReview (filled in with authorization)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.apiserver.resources import ResourceType
from tests.apiserver.status import APIError

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer


def review(api: APIServer, rt: ResourceType, body: Any, user: Any) -> dict[str, Any]:
    raise APIError(404, "the server could not find the requested resource")
