"""Leader election on a ``coordination.k8s.io/v1`` Lease, safe against a lost API server.

client-go's protocol (holder, duration, MicroTime renew and acquire times, transitions, optimistic
concurrency), with leadership as a deadline on the monotonic clock: :meth:`LeaderElector.is_leader` is
true only until ``renew_deadline`` after the start of the last successful renewal, whatever the renewing
thread is doing, and a candidate takes a lease over only ``lease_duration`` after it observed the last
renewal, so two processes never both act as leader. Details: ``docs/modules.md``."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from koordshared.apis.meta.quantity import format_micro_time
from koordshared.kube.client import ApiError, request
from koordshared.kube.process import parse_seconds
from koordshared.runtime.errors import APIUnavailable, ConfigError

log = logging.getLogger(__name__)


def default_identity() -> str:
    """``<hostname>_<random>`` as client-go's callers build it (unique per process)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    namespace: str = "koordinator-system"
    name: str = "koordinator-manager"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def validate(self) -> None:
        if not self.identity:
            raise ConfigError("leader election needs an identity")
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ConfigError(
                "leader election needs lease duration > renew deadline > retry period > 0, got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}"
            )

    @property
    def margin(self) -> float:
        """Seconds between the old leader stopping and the earliest take-over (writes must fit in it)."""
        return self.lease_duration - self.renew_deadline


class LeaseClient(Protocol):
    """The three Lease calls; ``None`` from :meth:`get` when there is no Lease. Errors: ``ApiError``
    (409 on a stale resourceVersion) or ``APIUnavailable``."""

    def get(self, timeout: float) -> Mapping[str, Any] | None: ...

    def create(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]: ...

    def update(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]: ...


class KubeLeaseClient:
    """:class:`LeaseClient` on the official client (raw JSON, so the MicroTimes go out as written)."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        self.api_client = api_client
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.path = f"{self.collection}/{name}"

    def get(self, timeout: float) -> Mapping[str, Any] | None:
        try:
            out: Mapping[str, Any] = request(self.api_client, "lease get", "GET", self.path, timeout=timeout)
        except ApiError as err:
            if err.not_found:
                return None
            raise
        return out

    def create(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]:
        out: Mapping[str, Any] = request(
            self.api_client, "lease create", "POST", self.collection, body=dict(lease), timeout=timeout
        )
        return out

    def update(self, lease: Mapping[str, Any], timeout: float) -> Mapping[str, Any]:
        out: Mapping[str, Any] = request(
            self.api_client, "lease update", "PUT", self.path, body=dict(lease), timeout=timeout
        )
        return out


def _spec(lease: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (lease or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


class LeaderElector:
    """Campaigns until ``stop``; :meth:`is_leader` answers from the monotonic deadline alone."""

    def __init__(
        self,
        config: ElectionConfig,
        client: LeaseClient,
        *,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] = lambda _identity: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        config.validate()
        self.config = config
        self.client = client
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._valid_until = float("-inf")
        self._leading = False
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.leader = ""
        self.transitions = 0

    # ---- state ------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True only while the last successful renewal is younger than ``renew_deadline``."""
        with self._lock:
            return self._leading and self._clock() < self._valid_until

    # ---- one attempt ------------------------------------------------------------------------------

    def _lease_body(self, current: Mapping[str, Any] | None, now_wall: float) -> dict[str, Any]:
        spec = _spec(current)
        cfg = self.config
        ours = spec.get("holderIdentity") == cfg.identity
        now = format_micro_time(now_wall)
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        meta: dict[str, Any] = {"name": cfg.name, "namespace": cfg.namespace}
        if current is not None:
            meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": max(round(cfg.lease_duration), 1),
                "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else now,
                "renewTime": now,
                "leaseTransitions": transitions if ours or current is None else transitions + 1,
            },
        }

    def _observe(self, lease: Mapping[str, Any] | None, now: float) -> None:
        spec = _spec(lease)
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
            holder = str(spec.get("holderIdentity") or "")
            if holder != self.leader:
                self.leader = holder
                self._on_new_leader(holder)

    def try_acquire_or_renew(self) -> bool:
        """One round: True when we hold the lease after it (and the leadership deadline moved on)."""
        started = self._clock()
        timeout = self.config.retry_period
        with self._lock:
            if self._leading:
                # Never let a hung call outlive the leadership it is meant to extend.
                timeout = max(min(timeout, self._valid_until - started), 0.05)
        try:
            current = self.client.get(timeout)
            self._observe(current, self._clock())
            spec = _spec(current)
            holder = str(spec.get("holderIdentity") or "")
            duration = spec.get("leaseDurationSeconds")
            lease_duration = (
                float(duration) if isinstance(duration, int) and duration > 0 else self.config.lease_duration
            )
            others = current is not None and holder and holder != self.config.identity
            if others and self._observed_at + lease_duration > self._clock():
                return False  # another holder, renewed within its lease as far as we have seen
            body = self._lease_body(current, self._wall())
            if current is None:
                written = self.client.create(body, timeout)
            else:
                written = self.client.update(body, timeout)
            self._observe(written, self._clock())
        except (ApiError, APIUnavailable) as err:
            log.info("leader election %s/%s: %s", self.config.namespace, self.config.name, str(err))
            return False
        with self._lock:
            self._valid_until = started + self.config.renew_deadline
        return True

    # ---- the loop -----------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead while renewals succeed, fall back to campaigning; release on ``stop``."""
        cfg = self.config
        while not stop.is_set():
            if not self.try_acquire_or_renew():
                stop.wait(cfg.retry_period)
                continue
            with self._lock:
                self._leading = True
            self.transitions += 1
            log.info("%s became leader of %s/%s", cfg.identity, cfg.namespace, cfg.name)
            self._on_started()
            while True:
                # Renew every retry period; closer to the deadline, retry sooner. Past it: lost.
                left = self._deadline() - self._clock()
                if left <= 0 or stop.wait(max(min(cfg.retry_period, left), 0.05)):
                    break
                if not self.try_acquire_or_renew() and self._clock() >= self._deadline():
                    break
            with self._lock:
                self._leading = False
            log.warning("%s stopped leading %s/%s", cfg.identity, cfg.namespace, cfg.name)
            self._on_stopped()
            if stop.is_set():
                self._release()
                return

    def _deadline(self) -> float:
        with self._lock:
            return self._valid_until

    def _release(self) -> None:
        """On a graceful stop: hand the lease over at once (client-go's ``ReleaseOnCancel``)."""
        try:
            current = self.client.get(self.config.retry_period)
            if _spec(current).get("holderIdentity") != self.config.identity or current is None:
                return
            body = self._lease_body(current, self._wall())
            body["spec"].update(holderIdentity="", leaseDurationSeconds=1)
            self.client.update(body, self.config.retry_period)
            log.info("%s released %s/%s", self.config.identity, self.config.namespace, self.config.name)
        except (ApiError, APIUnavailable) as err:
            log.info("lease not released (it will expire): %s", str(err))


_ELECTION_FIELDS = {
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
}


def parse_leader_election(raw: Any, where: str) -> tuple[bool, dict[str, Any]]:
    """A configuration file's ``leaderElection`` (component-base's ``LeaderElectionConfiguration``, as
    KubeSchedulerConfiguration and DeschedulerConfiguration carry it): whether to elect, and the fields
    given (durations in seconds, ``resourceName``, ``resourceNamespace``). Only ``leases`` locks."""
    if raw is None:
        return True, {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: leaderElection: want an object")
    unknown = sorted(set(raw) - _ELECTION_FIELDS)
    if unknown:
        raise ConfigError(f"{where}: leaderElection: unknown field(s) {', '.join(unknown)}")
    lock = raw.get("resourceLock") or "leases"
    if lock != "leases":
        raise ConfigError(f"{where}: leaderElection.resourceLock {lock!r}: only leases are supported")
    out: dict[str, Any] = {}
    for key in ("leaseDuration", "renewDeadline", "retryPeriod"):
        if raw.get(key) is not None:
            out[key] = parse_seconds(raw[key], f"{where}: leaderElection.{key}")
    for key in ("resourceName", "resourceNamespace"):
        if raw.get(key) is not None:
            if not isinstance(raw[key], str) or not raw[key]:
                raise ConfigError(f"{where}: leaderElection.{key}: want a name")
            out[key] = raw[key]
    elect = raw.get("leaderElect", True)
    if not isinstance(elect, bool):
        raise ConfigError(f"{where}: leaderElection.leaderElect: want true or false, got {elect!r}")
    return elect, out
