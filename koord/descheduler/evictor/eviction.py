"""One ``policy/v1`` Eviction of a pod, with its UID as precondition: the one call that takes a pod away,
whether the evictor evicts at once or a PodMigrationJob does. A 429 (a PodDisruptionBudget, or the server
throttling) is a refusal, never forced; every failure is an :class:`EvictionRefused` naming its result.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from koord.descheduler.framework.interface import EvictionRefused
from koordshared.kube.client import ApiError, request
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 5.0


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (Koordinator's notes quote pods, nodes and reasons so)."""
    return json.dumps(text, ensure_ascii=False)


def post_eviction(client: Any, namespace: str, name: str, uid: str, grace: int | None) -> None:
    """Evict ``namespace/name`` (only the pod ``uid``), with ``grace`` seconds when given."""
    delete: dict[str, Any] = {"preconditions": {"uid": uid}}
    if grace is not None:
        delete["gracePeriodSeconds"] = grace
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": delete,
    }
    if client is None:
        raise EvictionRefused("error", "no API client")
    try:
        request(
            client,
            f"evict {namespace}/{name}",
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            body=body,
            timeout=REQUEST_TIMEOUT,
        )
    except ApiError as err:
        if err.status == 429:
            log.info("eviction of %s/%s refused (retried later): %s", namespace, name, err)
            raise EvictionRefused("pdb", str(err)) from err
        result = {404: "not-found", 409: "conflict"}.get(err.status, "error")
        log.warning("eviction of %s/%s failed: %s", namespace, name, err)
        raise EvictionRefused(result, str(err)) from err
    except APIUnavailable as err:
        log.warning("eviction of %s/%s failed: %s", namespace, name, err)
        raise EvictionRefused("error", str(err)) from err
