"""What koord-scheduler's handle offers a plugin's controllers that write to the API server (an
ElasticQuota's figures, the built-in quotas, the over-use revoke; a PodGroup's status; a Reservation's status
and its garbage collection): create an object unless it exists, JSON-merge-patch one (or its status), delete
one, evict a pod. Part of
:class:`~koord.scheduler.framework.interface.SchedulerHandle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from koord.apis.groups import Resource
from koord.scheduler.framework.types import Obj

if TYPE_CHECKING:
    from koord.scheduler.framework.interface import Status


class ObjectHandle(Protocol):
    def ensure_object(self, resource: Resource, obj: Obj) -> Status | None:
        """Create ``obj`` unless it exists; an error status when the API refuses."""

    def patch_object(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str = "",
    ) -> Status | None:
        """A JSON merge patch of the object or of its ``subresource`` (``status``; ``null`` removes a key;
        a ``metadata.resourceVersion`` in the patch makes it conditional)."""

    def delete_object(self, resource: Resource, namespace: str, name: str) -> Status | None:
        """Delete the object; one gone already is no error."""

    def evict_pod(self, pod: Obj) -> Status | None:
        """Evict the pod through the Eviction API (PodDisruptionBudgets apply); one gone already is no
        error."""
