"""The ElasticQuota status writer (Koordinator's ``ElasticQuotaController``): every second, each quota
object gets the scheduler's figures as annotations (``runtime``, ``request``, ``child-request``,
``non-preemptible-request``, ``non-preemptible-used``) and ``status.used``, in one JSON merge patch, only
when a figure changed (zeros ignored, as Koordinator compares). It also creates the root, system and
default quotas in ``quotaGroupNamespace`` when they are missing, as Koordinator's plugin does at start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from koord.scheduler.framework import Obj, SchedulerHandle, Store
from koord.scheduler.framework.types import Resources, resources_of
from koord.scheduler.plugins.elasticquota.ledger import Ledger, Summary
from koord.scheduler.plugins.elasticquota.quotas import built_in_object
from koord.scheduler.plugins.elasticquota.units import to_list
from koordshared.apis.core.pod import as_map
from koordshared.apis.extension import elasticquota as eq
from koordshared.apis.meta.groups import ELASTIC_QUOTAS

log = logging.getLogger(__name__)

CONTROLLER = "ElasticQuotaController"
SYNC_PERIOD = 1.0


def _nonzero(values: Mapping[str, int]) -> Resources:
    return {r: v for r, v in values.items() if v != 0}


def _encoded(values: Mapping[str, int]) -> str:
    """A ResourceList as Go's ``json.Marshal`` writes it (keys sorted, no spaces)."""
    return json.dumps(to_list(values), separators=(",", ":"), sort_keys=True)


def _annotation_values(raw: Any) -> Resources | None:
    """The figures an annotation holds; ``None`` when it is not a ResourceList (then it is rewritten)."""
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return resources_of(doc) if isinstance(doc, Mapping) else None


def status_patch(quota: Obj, summary: Summary) -> dict[str, Any] | None:
    """The merge patch that brings ``quota``'s annotations and ``status.used`` to ``summary``; ``None``
    when nothing changed."""
    usage = summary.usage
    want = {
        eq.ANNOTATION_RUNTIME: summary.runtime,
        eq.ANNOTATION_REQUEST: summary.request,
        eq.ANNOTATION_CHILD_REQUEST: summary.child_request,
        eq.ANNOTATION_NON_PREEMPTIBLE_REQUEST: usage.non_preemptible_request,
        eq.ANNOTATION_NON_PREEMPTIBLE_USED: usage.non_preemptible_used,
    }
    have = eq.annotations_of(quota)
    annotations = {
        key: _encoded(values)
        for key, values in want.items()
        if (old := _annotation_values(have.get(key))) is None or _nonzero(old) != _nonzero(values)
    }
    patch: dict[str, Any] = {}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    raw_used = as_map(as_map(quota, "status"), "used")
    if _nonzero(resources_of(raw_used)) != _nonzero(usage.used):
        used: dict[str, Any] = dict(to_list(usage.used))
        for gone in raw_used:
            used.setdefault(str(gone), None)  # a merge patch removes a key only when told so
        patch["status"] = {"used": used}
    return patch or None


class StatusController:
    """Writes every quota's figures back to its object; :attr:`period` seconds apart."""

    name = CONTROLLER
    period = SYNC_PERIOD

    def __init__(self, ledger: Ledger, quotas: Store, handle: SchedulerHandle, namespace: str) -> None:
        self._ledger = ledger
        self._quotas = quotas
        self._handle = handle
        self._namespace = namespace
        self._ensured = False

    def sync(self) -> None:
        if not self._ensured:
            self._ensured = self.ensure_built_in()
        for quota in self._quotas.objects():
            meta = as_map(quota, "metadata")
            name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
            summary = self._ledger.summary(name)
            spec = self._ledger.spec(name)
            if summary is None or spec is None or spec.namespace not in ("", namespace):
                continue  # another object of the same name is the one counted
            patch = status_patch(quota, summary)
            if patch is None:
                continue
            failed = self._handle.patch_object(ELASTIC_QUOTAS, namespace, name, patch)
            if failed is not None:
                log.warning("updating ElasticQuota %s/%s: %s", namespace, name, failed.message)

    def ensure_built_in(self) -> bool:
        """Create the root, system and default quotas' objects that are missing; whether all exist."""
        ok = True
        for name in eq.BUILT_IN:
            if self._quotas.get(f"{self._namespace}/{name}") is not None:
                continue
            spec = self._ledger.spec(name)
            maximum = spec.max if spec is not None else {}
            failed = self._handle.ensure_object(
                ELASTIC_QUOTAS, built_in_object(name, self._namespace, maximum)
            )
            if failed is not None:
                log.warning("creating ElasticQuota %s/%s: %s", self._namespace, name, failed.message)
                ok = False
        return ok
