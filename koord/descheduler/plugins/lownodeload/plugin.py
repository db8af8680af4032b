"""``LowNodeLoad`` (Balance): evicts pods from nodes whose real usage is over the high thresholds, when
under-used nodes can take them (Koordinator's
``pkg/descheduler/framework/plugins/loadaware/low_node_load.go``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from koord.descheduler.framework.interface import Handle, Obj, Status
from koord.descheduler.framework.nodefit import NodeFit, ParsedMemo
from koord.descheduler.plugins.lownodeload.anomaly import Detectors
from koord.descheduler.plugins.lownodeload.args import LowNodeLoadArgs, NodePool, parse_args
from koord.descheduler.plugins.lownodeload.balance import Pass, evict_from_sources
from koord.descheduler.plugins.lownodeload.sorter import PodFacts, pod_facts, sort_nodes
from koord.descheduler.plugins.lownodeload.usage import (
    NodeUsage,
    Reported,
    classify,
    complete_thresholds,
    node_usages,
    over,
    reported,
    set_thresholds,
)
from koordshared.apis.core import pod as podutil
from koordshared.apis.core.node import node_name, select
from koordshared.apis.core.pod import str_map
from koordshared.apis.extension import qos as extension

log = logging.getLogger(__name__)

NAME = "LowNodeLoad"


class LowNodeLoad:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Handle) -> None:
        self.args: LowNodeLoadArgs = parse_args(args, handle.interval)
        self.handle = handle
        self.node_detectors = Detectors(self.args.detector_cache_timeout, handle.monotonic)
        self.prod_detectors = Detectors(self.args.detector_cache_timeout, handle.monotonic)
        self._facts: dict[str, tuple[Obj, PodFacts]] = {}
        self._reported: dict[str, tuple[Obj, Reported]] = {}
        self._requests: ParsedMemo = {}
        self.last_evicted: list[tuple[str, str, str]] = []
        """(pod, node, reason) of the last round's evictions (decisions, in a dry run)."""

    # ---- memoized per object (informers replace an object when it changes) ------------------------

    def facts(self, pod: Obj) -> PodFacts:
        key = podutil.pod_key(pod)
        hit = self._facts.get(key)
        if hit is None or hit[0] is not pod:
            hit = self._facts[key] = (pod, pod_facts(pod))
        return hit[1]

    def reported(self, node_metric: Obj) -> Reported:
        name = node_name(node_metric)
        hit = self._reported.get(name)
        if hit is None or hit[0] is not node_metric:
            hit = self._reported[name] = (node_metric, reported(node_metric))
        return hit[1]

    def is_prod(self, pod: Obj) -> bool:
        return self.facts(pod).priority_class is extension.PriorityClass.PROD

    def pod_filter(self, pod: Obj) -> bool:
        """The evictor's filter, the pod selectors (any) and the evictable namespaces."""
        ns = str(podutil.meta(pod).get("namespace") or "")
        a = self.args
        if (a.include_namespaces and ns not in a.include_namespaces) or ns in a.exclude_namespaces:
            return False
        if a.pod_selectors:
            labels = str_map(podutil.meta(pod).get("labels") or {})
            if not any(s.selector.matches(labels) for s in a.pod_selectors):
                return False
        return self.handle.evictor.filter(pod)

    # ---- the round -----------------------------------------------------------------------------------

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        self.last_evicted = []
        if self.args.paused:
            log.info("%s is paused and does nothing", NAME)
            return None
        processed: set[str] = set()
        for pool in self.args.pools:
            self.process_pool(pool, nodes, processed)
        live = {podutil.pod_key(p) for n in nodes for p in self.handle.pods_on_node(node_name(n))}
        self._facts = {k: v for k, v in self._facts.items() if k in live}
        self._requests = {k: v for k, v in self._requests.items() if k in live}
        names = {node_name(n) for n in nodes}
        self._reported = {k: v for k, v in self._reported.items() if k in names}
        return None

    def process_pool(self, pool: NodePool, nodes: Sequence[Obj], processed: set[str]) -> None:
        if pool.node_selector is not None:
            nodes = [n for n in select(nodes, pool.node_selector) if node_name(n) not in processed]
        if not nodes:
            log.info("%s: no nodes", pool.name)
            return
        names, pcts = complete_thresholds(
            pool.use_deviation_thresholds, pool.low, pool.high, pool.prod_low, pool.prod_high
        )
        usages, skipped = node_usages(
            nodes,
            names,
            node_metric=self.handle.node_metric,
            pods_on_node=self.handle.pods_on_node,
            is_prod=self.is_prod,
            reported_of=self.reported,
            now=self.handle.now(),
            expiration_seconds=self.args.node_metric_expiration_seconds,
        )
        for name, why in sorted(skipped.items()):
            log.info("%s: %s left out: %s", pool.name, name, why)
        set_thresholds(usages, names, pcts, pool.use_deviation_thresholds)
        classes = classify(usages)
        source_names = [u.name for u in classes.source]
        prod_names = [u.name for u in classes.prod_high]
        self.node_detectors.reset([u.name for u in usages if u.name not in source_names])
        self.prod_detectors.reset([u.name for u in usages if u.name not in prod_names])
        self._log_classes(pool, usages, classes)
        if not classes.source and not classes.prod_high:
            return
        abnormal = self.node_detectors.abnormal(source_names, pool.anomaly)
        prod_abnormal = self.prod_detectors.abnormal(prod_names, pool.anomaly)
        for u in classes.source:
            self._log_anomaly(pool, u.name, "node", u.name in abnormal, self.node_detectors)
        for u in classes.prod_high:
            self._log_anomaly(pool, u.name, "prod", u.name in prod_abnormal, self.prod_detectors)
        if not abnormal and not prod_abnormal:
            return
        under_used = len(classes.low) + len(classes.prod_low) + len(classes.both_low)
        if under_used == 0:
            log.info("%s: no node is under-used; nothing to do (tune the thresholds?)", pool.name)
            return
        if under_used <= self.args.number_of_nodes:
            log.info(
                "%s: %d under-used node(s), not more than numberOfNodes=%d",
                pool.name,
                under_used,
                self.args.number_of_nodes,
            )
            return
        if under_used == len(nodes):
            log.info("%s: every node is under-used; nothing to do", pool.name)
            return
        sources = sort_nodes([u for u in classes.source if u.name in abnormal], pool.resource_weights, False)
        prod_sources = sort_nodes(
            [u for u in classes.prod_high if u.name in prod_abnormal], pool.resource_weights, True
        )
        p = Pass(
            pool=pool.name,
            plugin=NAME,
            names=names,
            weights=pool.resource_weights,
            facts={
                podutil.pod_key(pod): self.facts(pod) for u in (*sources, *prod_sources) for pod in u.pods
            },
            pod_filter=self.pod_filter,
            evictor=self.handle.evictor,
            node_fit=NodeFit(self.handle.pods_on_node, self._requests) if self.args.node_fit else None,
            dry_run=self.args.dry_run,
            reason=self._reason_fn(pool),
            on_normal=self._on_normal,
            evicted=self.last_evicted,
        )
        evict_from_sources(sources, classes.low, prod_sources, classes.prod_low, classes.both_low, p)
        self.node_detectors.mark_normal([u.name for u in sources])
        self.prod_detectors.mark_normal([u.name for u in prod_sources])
        processed.update(source_names)

    def _on_normal(self, node: NodeUsage, prod: bool) -> None:
        log.info("%s is under its %s high thresholds now", node.name, "prod" if prod else "node")
        (self.prod_detectors if prod else self.node_detectors).reset([node.name])

    def _reason_fn(self, pool: NodePool) -> Any:
        """``overUtilizedEvictionReason``: the text of the Event and the log line."""
        deviation = pool.use_deviation_thresholds

        def reason(node: NodeUsage, prod: bool) -> str:
            usage, high = node.view(prod)
            view = "prod" if prod else "node"
            pcts = pool.prod_high if prod else pool.high
            parts = []
            for r in sorted(over(usage, high)):
                cap = node.capacity.get(r, 0)
                thr = 100.0 * high[r] / cap if deviation and cap else pcts.get(r, 100.0)
                parts.append(f"{view} {r} usage({node.percent(r, prod):.2f}%)>threshold({thr:.2f}%)")
            return "node is overutilized, " + ", ".join(parts)

        return reason

    def _log_classes(self, pool: NodePool, usages: Sequence[NodeUsage], classes: Any) -> None:
        for u in sorted(usages, key=lambda x: x.name):
            shown = ", ".join(
                f"{r} {u.percent(r, False):.1f}%"
                for r in ("cpu", "memory")
                if r in u.usage and u.capacity.get(r)
            )
            log.info("%s: %s %s (%s)", pool.name, u.name, classes.of(u.name), shown)

    def _log_anomaly(
        self, pool: NodePool, name: str, view: str, abnormal: bool, detectors: Detectors
    ) -> None:
        if abnormal:
            log.info("%s: %s is abnormal (%s view): evicting", pool.name, name, view)
        else:
            log.info(
                "%s: %s over its %s thresholds %d time(s) in a row, abnormal after more than %d",
                pool.name,
                name,
                view,
                detectors.count(name),
                pool.anomaly.consecutive_abnormalities,
            )
