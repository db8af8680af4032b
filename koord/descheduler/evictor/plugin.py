"""``MigrationController``, the default Evict and Filter plugin: Koordinator's name and args (so a
Koordinator DeschedulerConfiguration keeps working), evicting straight through the Eviction API.

``filter(pod)`` applies the static filters (:mod:`.filters`); ``pre_eviction_filter(pod)`` the limits on
evictions under way (:mod:`.limits`); ``evict(pod, options)`` checks both again (a plugin that skipped
them still cannot evict a protected pod), waits for the ``evictQPS``/``evictBurst`` rate, then posts a
``policy/v1`` Eviction with the pod's UID as precondition. A 429 (a PodDisruptionBudget, or the server
throttling) is a refusal, never forced: the pod is skipped and may be chosen again in a later round.
Every eviction is logged with its reason text and recorded as a ``Descheduled`` Event (action
``Evicting``, as Koordinator's evictor) regarding the pod; a dry run logs the same decision ("would
evict") and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from koord.descheduler.evictor.args import MigrationControllerArgs, parse_args
from koord.descheduler.evictor.filters import StaticFilter
from koord.descheduler.evictor.limits import Limits
from koord.descheduler.framework.interface import EvictionRefused, EvictOptions, Handle, Obj
from koord.descheduler.framework.nodefit import NodeFit
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.node import is_ready
from koordshared.apis.core.pod import as_map
from koordshared.kube.client import ApiError, request
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime.errors import APIUnavailable

log = logging.getLogger(__name__)

NAME = "MigrationController"
REQUEST_TIMEOUT = 5.0
BLOCK_ALL_PRIORITIES = -(2**31)


class MigrationController:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.args: MigrationControllerArgs = parse_args(args)
        self.handle = handle
        self.limits = Limits(
            self.args,
            get_pod=handle.get_pod,
            workload_pods=lambda uid: handle.informers.pods.by_index("owner", uid),
            all_pods=handle.informers.pods.objects,
            clock=handle.monotonic,
            wall_clock=handle.now,
        )
        self.static = StaticFilter(
            self.args,
            priority_threshold=self._priority_threshold,
            nodes=lambda: [n for n in handle.informers.nodes.objects() if is_ready(n)],
            node_fit=self._node_fit,
        )
        self.rate = TokenBucket(self.args.evict_qps, self.args.evict_burst, handle.monotonic)
        self._fit: NodeFit | None = None
        self._threshold: int | None = self.args.priority_threshold_value
        self._told: set[str] = set()
        """The limits that held a pod back this round, each said once at info."""

    # ---- helpers ---------------------------------------------------------------------------------------

    def _node_fit(self) -> NodeFit:
        if self._fit is None:
            self._fit = NodeFit(self.handle.pods_on_node)
        return self._fit

    def _priority_threshold(self) -> int | None:
        name = self.args.priority_threshold_name
        if self._threshold is None and name:
            try:
                pc = request(
                    self.handle.client,
                    f"get priorityclass {name}",
                    "GET",
                    f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}",
                    timeout=REQUEST_TIMEOUT,
                )
                self._threshold = int(pc["value"])
            except (ApiError, APIUnavailable, KeyError, TypeError, ValueError) as err:
                log.error("priorityThreshold.name %s: %s; no pod with a priority is evicted", name, err)
                return BLOCK_ALL_PRIORITIES
        return self._threshold

    def begin_round(self) -> None:
        self._fit = None
        self._told.clear()
        self.limits.begin_round()

    # ---- the plugin ------------------------------------------------------------------------------------

    def filter(self, pod: Obj) -> bool:
        reasons = self.static.reasons(pod)
        if reasons:
            log.debug("%s is not evictable: %s", podutil.pod_key(pod), "; ".join(reasons))
        return not reasons

    def pre_eviction_filter(self, pod: Obj) -> bool:
        result, why = self.limits.refusal(pod)
        if result:
            level = logging.DEBUG if result in self._told else logging.INFO
            self._told.add(result)
            log.log(level, "not evicting %s now (%s): %s", podutil.pod_key(pod), result, why)
        return not result

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        key = podutil.pod_key(pod)
        node = str(as_map(pod, "spec").get("nodeName") or "")
        reasons = self.static.reasons(pod)
        if reasons:
            raise EvictionRefused("filtered", f"{key}: {'; '.join(reasons)}")
        result, why = self.limits.refusal(pod)
        if result:
            log.info("not evicting %s from %s: %s", key, node, why)
            raise EvictionRefused(result, why)
        dry_run = options.dry_run or self.args.dry_run
        if dry_run:
            self.limits.track(pod, dry_run=True)
            log.info("dry run: would evict %s from %s (%s): %s", key, node, options.plugin, options.reason)
            return True
        delay = self.rate.wait_time()
        while delay > 0:
            if self.handle.wait(delay):
                raise EvictionRefused("stopping", "the descheduler is stopping")
            delay = self.rate.wait_time()
        self.rate.allow()
        self._post_eviction(pod, options)
        self.limits.track(pod, dry_run=False)
        log.info("evicted %s from %s (%s): %s", key, node, options.plugin, options.reason)
        self.handle.recorder.event(
            pod,
            "Normal",
            "Descheduled",
            f"evicted by koord-descheduler {options.plugin}: {options.reason}",
            action="Evicting",
        )
        return True

    def _post_eviction(self, pod: Obj, options: EvictOptions) -> None:
        meta = podutil.meta(pod)
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        delete: dict[str, Any] = {"preconditions": {"uid": meta.get("uid")}}
        grace = (
            options.grace_period_seconds
            if options.grace_period_seconds is not None
            else self.args.grace_period_seconds
        )
        if grace is not None:
            delete["gracePeriodSeconds"] = grace
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
            "deleteOptions": delete,
        }
        if self.handle.client is None:
            raise EvictionRefused("error", "no API client")
        try:
            request(
                self.handle.client,
                f"evict {ns}/{name}",
                "POST",
                f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                body=body,
                timeout=REQUEST_TIMEOUT,
            )
        except ApiError as err:
            if err.status == 429:
                log.info("eviction of %s/%s refused (retried in a later round): %s", ns, name, err)
                raise EvictionRefused("pdb", str(err)) from err
            result = {404: "not-found", 409: "conflict"}.get(err.status, "error")
            log.warning("eviction of %s/%s failed: %s", ns, name, err)
            raise EvictionRefused(result, str(err)) from err
        except APIUnavailable as err:
            log.warning("eviction of %s/%s failed: %s", ns, name, err)
            raise EvictionRefused("error", str(err)) from err
