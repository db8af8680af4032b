"""``RemovePodsViolatingNodeAffinity`` (Deschedule; the Kubernetes descheduler's plugin): a pod whose
required node affinity its node no longer satisfies (labels changed after scheduling:
*IgnoredDuringExecution*) is evicted, when some other node in the round would take it (``NodeFit``).

Args: ``nodeAffinityType`` (``[requiredDuringSchedulingIgnoredDuringExecution]``, the only type
supported; preferred affinity is refused at start), ``namespaces.{include,exclude}`` and
``labelSelector``. Pods must pass the profile's evictor filter.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from koord.descheduler.framework.interface import EvictOptions, Handle, Obj, Status
from koord.descheduler.framework.nodefit import NodeFit
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.node import matches_node_selector, node_name
from koordshared.apis.core.pod import as_map, str_map
from koordshared.apis.meta.selector import LabelSelector, parse_selector
from koordshared.apis.meta.strictargs import decode
from koordshared.runtime.errors import InvalidArgs

log = logging.getLogger(__name__)

NAME = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def has_required_affinity(pod: Obj) -> bool:
    affinity = as_map(as_map(as_map(pod, "spec"), "affinity"), "nodeAffinity")
    return bool(affinity.get(REQUIRED))


class RemovePodsViolatingNodeAffinity:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        v = decode(args, {"nodeAffinityType": "str_list", "namespaces": "object", "labelSelector": "object"})
        types = v.get("nodeAffinityType", ())
        if not types:
            raise InvalidArgs(f"nodeAffinityType: required, e.g. [{REQUIRED}]")
        bad = [t for t in types if t != REQUIRED]
        if bad:
            raise InvalidArgs(
                f"nodeAffinityType: {', '.join(bad)} not supported; the only type is {REQUIRED}"
            )
        ns = decode(v.get("namespaces"), {"include": "str_list", "exclude": "str_list"}, "namespaces.")
        self.include, self.exclude = frozenset(ns.get("include", ())), frozenset(ns.get("exclude", ()))
        if self.include and self.exclude:
            raise InvalidArgs("namespaces: only one of include and exclude may be set")
        self.selector: LabelSelector | None = None
        if "labelSelector" in v:
            self.selector = parse_selector(v["labelSelector"])
            if self.selector.error:
                raise InvalidArgs(f"labelSelector: {self.selector.error}")
        self.handle = handle

    def _candidate(self, pod: Obj) -> bool:
        ns = str(podutil.meta(pod).get("namespace") or "")
        if (self.include and ns not in self.include) or ns in self.exclude:
            return False
        if self.selector is not None and not self.selector.matches(
            str_map(podutil.meta(pod).get("labels") or {})
        ):
            return False
        return has_required_affinity(pod) and self.handle.evictor.filter(pod)

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        fit = NodeFit(self.handle.pods_on_node)
        for node in nodes:
            name = node_name(node)
            for pod in self.handle.pods_on_node(name):
                if not self._candidate(pod) or matches_node_selector(pod, node):
                    continue
                if not any(fit.fits(pod, other) for other in nodes if node_name(other) != name):
                    log.info(
                        "%s violates its node affinity on %s, but no other node would take it",
                        podutil.pod_key(pod),
                        name,
                    )
                    continue
                if not self.handle.evictor.pre_eviction_filter(pod):
                    continue
                reason = f"pod's required node affinity no longer matches node {name}"
                self.handle.evictor.evict(pod, EvictOptions(plugin=NAME, reason=reason))
        return None
