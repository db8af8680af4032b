"""koord-descheduler's configuration: the ``--config`` DeschedulerConfiguration (``descheduler/v1alpha2``,
Koordinator's shape) and the flags that override it.

Read from the file: ``deschedulingInterval`` (a Go duration; absent or 0 means one round, then exit, as
in Koordinator), ``dryRun``, ``nodeSelector`` (a label selector object), ``maxNoOfPodsToEvictPerNode``/
``PerNamespace``/``Total`` (per round, across profiles), ``profiles`` (:mod:`.framework.profile`),
``leaderElection`` (``leaderElect``, ``leaseDuration``, ``renewDeadline``, ``retryPeriod``,
``resourceLock: leases``, ``resourceName``, ``resourceNamespace``) and ``metricsBindAddress``/
``healthzBindAddress`` (one server serves both; ``--addr`` wins). ``clientConnection``,
``enableProfiling`` and ``enableContentionProfiling`` are accepted and have no effect. Any other field,
and a malformed one, is a :class:`~koordshared.runtime.errors.ConfigError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.descheduler.framework.profile import Profile, parse_node_selector, parse_profiles
from koord.descheduler.framework.runtime import RoundLimits
from koordshared.apis.meta.selector import LabelSelector
from koordshared.kube.leaderelection import ElectionConfig, default_identity, parse_leader_election
from koordshared.kube.process import Address, parse_addr, parse_seconds
from koordshared.runtime.configfile import read_config_file
from koordshared.runtime.errors import ConfigError

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerConfiguration"
DEFAULT_ADDR = "0.0.0.0:10251"
LEASE_NAME = "koord-descheduler"
LEASE_NAMESPACE = "koordinator-system"
_TOP = {
    "apiVersion",
    "kind",
    "leaderElection",
    "clientConnection",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "deschedulingInterval",
    "dryRun",
    "profiles",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
}


@dataclass(frozen=True, slots=True)
class Configuration:
    """The file's content, defaulted (no flags applied)."""

    interval: float = 0.0
    dry_run: bool = False
    node_selector: LabelSelector | None = None
    limits: RoundLimits = field(default_factory=RoundLimits)
    profiles: tuple[Profile, ...] = field(default_factory=lambda: parse_profiles(None, "profiles"))
    leader_elect: bool = True
    election: Mapping[str, Any] = field(default_factory=dict)
    """``leaderElection`` fields given (seconds for the durations)."""
    bind_address: str = ""


@dataclass(frozen=True, slots=True)
class DeschedulerConfig:
    """The process's configuration: the file's, with the flags applied."""

    addr: Address
    configuration: Configuration
    kubeconfig: str = ""
    config_file: str = ""
    leader_election: bool = True
    election: ElectionConfig = field(
        default_factory=lambda: ElectionConfig(
            namespace=LEASE_NAMESPACE, name=LEASE_NAME, identity=default_identity()
        )
    )
    request_timeout: float = 3.0
    sync_timeout: float = 60.0


def _uint(doc: Mapping[str, Any], key: str, where: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: {key}: want a non-negative integer, got {value!r}")
    return value


def _bool(doc: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: want true or false, got {value!r}")
    return value


def parse_configuration(doc: Any, where: str = "config") -> Configuration:
    """A decoded DeschedulerConfiguration (``None``: every default)."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: want a {KIND} object")
    if doc.get("kind", KIND) != KIND:
        raise ConfigError(f"{where}: kind {doc.get('kind')!r}: want {KIND}")
    if doc.get("apiVersion", API_VERSION) != API_VERSION:
        raise ConfigError(f"{where}: apiVersion {doc.get('apiVersion')!r}: want {API_VERSION}")
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    interval = parse_seconds(doc.get("deschedulingInterval") or 0, f"{where}: deschedulingInterval")
    if interval < 0:
        raise ConfigError(f"{where}: deschedulingInterval must not be negative")
    addresses = {doc.get(k) for k in ("metricsBindAddress", "healthzBindAddress") if doc.get(k)}
    for a in addresses:
        parse_addr(str(a), f"{where}: bind address")
    if len(addresses) > 1:
        raise ConfigError(
            f"{where}: metricsBindAddress and healthzBindAddress differ "
            f"({', '.join(sorted(map(str, addresses)))}); one server serves /metrics, /healthz and /readyz"
        )
    leader_elect, election = parse_leader_election(doc.get("leaderElection"), where)
    return Configuration(
        interval=interval,
        dry_run=_bool(doc, "dryRun", where, False),
        node_selector=parse_node_selector(doc.get("nodeSelector"), f"{where}: nodeSelector"),
        limits=RoundLimits(
            per_node=_uint(doc, "maxNoOfPodsToEvictPerNode", where),
            per_namespace=_uint(doc, "maxNoOfPodsToEvictPerNamespace", where),
            total=_uint(doc, "maxNoOfPodsToEvictTotal", where),
        ),
        profiles=parse_profiles(doc.get("profiles"), f"{where}: profiles"),
        leader_elect=leader_elect,
        election=election,
        bind_address=str(next(iter(addresses), "")),
    )


def load_configuration(path: str) -> Configuration:
    return parse_configuration(read_config_file(path), f"--config {path}")


def build(options: Mapping[str, Any]) -> DeschedulerConfig:
    """From the CLI's option values (flag names with dashes; ``None``: not given, the file decides)."""
    o = options
    config_file = str(o.get("config") or "")
    conf = load_configuration(config_file) if config_file else Configuration()
    e = conf.election

    def seconds(flag: str, key: str, default: float) -> float:
        if o.get(flag) is not None:
            return parse_seconds(o[flag], f"--{flag}")
        return float(e.get(key, default))

    election = ElectionConfig(
        namespace=str(
            o.get("leader-elect-resource-namespace") or e.get("resourceNamespace") or LEASE_NAMESPACE
        ),
        name=str(o.get("leader-elect-resource-name") or e.get("resourceName") or LEASE_NAME),
        identity=str(o.get("leader-elect-identity") or "") or default_identity(),
        lease_duration=seconds("leader-elect-lease-duration", "leaseDuration", 15.0),
        renew_deadline=seconds("leader-elect-renew-deadline", "renewDeadline", 10.0),
        retry_period=seconds("leader-elect-retry-period", "retryPeriod", 2.0),
    )
    leader = conf.leader_elect if o.get("leader-elect") is None else bool(o["leader-elect"])
    cfg = DeschedulerConfig(
        addr=parse_addr(str(o.get("addr") or conf.bind_address or DEFAULT_ADDR)),
        configuration=conf,
        kubeconfig=str(o.get("kubeconfig") or ""),
        config_file=config_file,
        leader_election=leader,
        election=election,
        request_timeout=parse_seconds(o.get("request-timeout") or "3s", "--request-timeout"),
        sync_timeout=parse_seconds(o.get("sync-timeout") or "60s", "--sync-timeout"),
    )
    if cfg.request_timeout <= 0:
        raise ConfigError("--request-timeout must be positive")
    if leader:
        election.validate()
        if cfg.request_timeout >= election.margin:
            # An eviction sent just before the leadership deadline must land before anyone else can lead.
            raise ConfigError(
                f"--request-timeout={cfg.request_timeout:g}s must be below the lease duration minus the "
                f"renew deadline ({election.margin:g}s)"
            )
    return cfg
