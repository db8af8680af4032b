"""Pods on this node: the kubelet ``/pods`` source and the :class:`PodsInformer` that keeps the snapshot.

Three sources share one small interface, ``list_pods(layout) -> [PodInfo]`` raising :class:`APIUnavailable`:
the kubelet (:class:`KubeletPodSource`), the API server list+watch (:class:`APIPodSource`) and standalone
cgroup discovery (``discovery.CgroupDiscovery``). The informer refreshes periodically and early on PLEG
events (rate limited); an error or an empty list keeps the old pods (a restarting kubelet answers
``[]``), and after ``staleness`` seconds without a good answer it reports itself degraded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from koordlet import api
from koordlet.statesinformer.kubelet import KubeletClient, KubeletEndpoint
from koordlet.statesinformer.podinfo import pod_infos, podlist_items
from koordlet.system.podpath import CgroupLayout
from koordshared.kube.ratelimit import TokenBucket
from koordshared.runtime.errors import APIUnavailable

__all__ = ["APIPodSource", "KubeletEndpoint", "KubeletPodSource", "PodSource", "PodsInformer"]

log = logging.getLogger(__name__)


class PodSource(Protocol):
    trust_empty: bool
    """Whether an empty answer is believed (cgroup discovery) or taken as a restarting source (kubelet)."""
    kick_rate: float
    kick_burst: int
    """How often PLEG events may ask it for an early refresh (per second, burst)."""

    def list_pods(self, layout: CgroupLayout | None) -> Sequence[api.PodInfo]:
        """Every pod of this node, cgroup dirs built with ``layout``; :class:`APIUnavailable` when the
        source fails."""
        ...


class KubeletPodSource:
    """``GET /pods/`` of the kubelet, decoded as a PodList."""

    trust_empty = False
    kick_rate, kick_burst = 5.0, 10  # koordlet's limiter on its kubelet calls

    def __init__(self, endpoint: Callable[[], KubeletEndpoint], *, user_agent: str = "") -> None:
        self.client = KubeletClient(endpoint, user_agent=user_agent)

    def list_pods(self, layout: CgroupLayout | None) -> Sequence[api.PodInfo]:
        url, doc = self.client.get_json("/pods/")
        items = podlist_items(doc)
        if items is None:
            raise APIUnavailable(f"kubelet {url}: not a PodList")
        return pod_infos((p for p in items if isinstance(p, Mapping)), layout)


class WatchedPods(Protocol):
    """The API server's pods of this node as an informer caches them (``cluster.informer.Informer``)."""

    def has_synced(self) -> bool: ...

    def healthy(self) -> bool: ...

    def objects(self) -> list[Mapping[str, Any]]: ...


class APIPodSource:
    """Pods of this node from the API server (``fieldSelector=spec.nodeName=<node>``), as a pod source."""

    trust_empty = False
    kick_rate, kick_burst = 50.0, 50  # a read of the watch's cache: no call to limit

    def __init__(self, objects: WatchedPods) -> None:
        self.objects = objects

    def list_pods(self, layout: CgroupLayout | None) -> Sequence[api.PodInfo]:
        if not self.objects.has_synced():
            raise APIUnavailable("pods: the API server list has not completed yet")
        if not self.objects.healthy():
            # Counts as a failed refresh: the pods are kept and the informer turns degraded after
            # the staleness bound, as with an unreachable kubelet.
            raise APIUnavailable("pods: the API server watch is broken; pods may be stale")
        return pod_infos(self.objects.objects(), layout)


Hook = Callable[[], None]


class PodsInformer:
    """The pod snapshot: :meth:`refresh` is the unit of work; :meth:`kick` asks for an early one."""

    def __init__(
        self,
        source: PodSource,
        layout: Callable[[], CgroupLayout | None],
        *,
        clock: Callable[[], float],
        staleness: float,
        on_change: Hook | None = None,
        on_refresh: Callable[[bool, int], None] | None = None,
        kick_rate: float | None = None,
        kick_burst: int | None = None,
    ) -> None:
        """``kick_rate``/``kick_burst`` default to the source's own (its class attributes)."""
        self.source = source
        self._layout = layout
        self._clock = clock
        self.staleness = staleness
        self._on_change = on_change
        self._on_refresh = on_refresh
        rate = kick_rate if kick_rate is not None else source.kick_rate
        burst = kick_burst if kick_burst is not None else source.kick_burst
        self._limiter = TokenBucket(rate, burst, clock)
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._pods: tuple[api.PodInfo, ...] = ()
        self._synced = False
        self._pending = False
        self._last_good: float | None = None
        self._started = clock()

    def pods(self) -> tuple[api.PodInfo, ...]:
        with self._lock:
            return self._pods

    def has_synced(self) -> bool:
        with self._lock:
            return self._synced

    def degraded(self) -> bool:
        """No good pod list for longer than ``staleness`` (the snapshot is kept but may be wrong)."""
        with self._lock:
            since = self._last_good if self._last_good is not None else self._started
        return self._clock() - since > self.staleness

    def refresh(self) -> bool:
        """Fetch and rebuild the snapshot; False when the source failed or answered an empty list
        (the old pods stay). Concurrent calls are serialized."""
        with self._refresh_lock:
            try:
                built = tuple(self.source.list_pods(self._layout()))
            except APIUnavailable as err:
                log.warning("pods: refresh failed, keeping %d pods: %s", len(self.pods()), str(err))
                self._report(False, 0)
                return False
            if not built and self.pods() and not self.source.trust_empty:
                # A restarting kubelet answers an empty list: do not forget every pod because of it.
                log.info("pods: source answered no pods, keeping the %d known", len(self.pods()))
                self._report(False, 0)
                return False
            built = tuple(sorted(built, key=lambda p: (p.namespace, p.name, p.uid)))
            with self._lock:
                changed = built != self._pods
                if changed:  # an unchanged list stays the same object: readers may compare by identity
                    self._pods = built
                self._synced = True
                self._last_good = self._clock()
            self._report(True, len(built))
        if changed and self._on_change is not None:
            self._on_change()
        return True

    def _report(self, ok: bool, n: int) -> None:
        if self._on_refresh is not None:
            self._on_refresh(ok, n)

    def kick(self) -> bool:
        """An early refresh if the rate limiter allows (PLEG events); True if it ran. A refused kick is
        remembered and :meth:`retry` runs it once a token is there, so a burst of new pods beyond the
        limiter's burst waits a fraction of a second for its refresh, not the next periodic sync."""
        if not self._limiter.allow():
            self._pending = True
            return False
        self._pending = False
        self.refresh()
        return True

    def retry(self) -> float | None:
        """Run a refused kick if the limiter now allows; the seconds until it can when not yet, ``None``
        when no kick waits (the PLEG calls this between events and sleeps no longer than it says)."""
        if not self._pending:
            return None
        if self.kick():
            return None
        return max(self._limiter.wait_time(), 0.001)
