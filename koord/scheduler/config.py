"""koord-scheduler's ``--config``: a KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``) with
kube-scheduler's defaulting and validation (``apis/config/v1/defaults.go``, ``validation.go``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord.scheduler.framework.interface import EXTENSION_POINTS
from koord.scheduler.framework.profile import MULTI_POINT, Profile, parse_plugins
from koordshared.kube.leaderelection import parse_leader_election
from koordshared.runtime.configfile import read_config_file
from koordshared.runtime.errors import ConfigError
from koordshared.runtime.pluginset import PluginRef, PluginSet, plugin_config

API_GROUP = "kubescheduler.config.k8s.io"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "koord-scheduler"
LEASE_NAME = "koord-scheduler"
LEASE_NAMESPACE = "koordinator-system"

# kube-scheduler's default MultiPoint set, in its order and with its score weights; the names
# koord-scheduler does not implement (ImageLocality, volume plugins but VolumeBinding) are left out.
KUBE_DEFAULT_PLUGINS: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeBinding"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("DefaultBinder"),
)
NOT_IMPLEMENTED = frozenset(
    {"ImageLocality", "VolumeRestrictions", "NodeVolumeLimits", "VolumeZone", "DynamicResources"}
)
"""kube-scheduler's in-tree plugins koord-scheduler does not have: disabling them is fine (configurations
copied from kube-scheduler do), enabling one is an error."""

_TOP = {
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
}
_CLIENT = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
_PROFILE = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}


@dataclass(frozen=True, slots=True)
class SchedulerConfiguration:
    profiles: tuple[Profile, ...]
    percentage_of_nodes_to_score: int = 0
    parallelism: int = 16
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_elect: bool = True
    election: Mapping[str, Any] = field(default_factory=dict)
    kubeconfig: str = ""
    qps: float = 50.0
    """Requests per second of the scheduler's client (client-go's token bucket); below 0: no limit."""
    burst: int = 100


def default_plugins(registered: frozenset[str] | None = None) -> dict[str, PluginSet]:
    """kube-scheduler's defaults at ``multiPoint`` (those registered, when ``registered`` is given)."""
    refs = tuple(r for r in KUBE_DEFAULT_PLUGINS if registered is None or r.name in registered)
    return {MULTI_POINT: PluginSet(enabled=refs)}


def _int(
    doc: Mapping[str, Any], key: str, where: str, default: int, low: int, high: int | None = None
) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}: want an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ConfigError(f"{where}.{key}: {value} must be {bound}")
    return value


def _profile(raw: Any, where: str, registered: frozenset[str] | None) -> Profile:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: want a profile object")
    unknown = sorted(set(raw) - _PROFILE)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    name = raw.get("schedulerName") or DEFAULT_SCHEDULER_NAME
    if not isinstance(name, str):
        raise ConfigError(f"{where}.schedulerName: want a string")
    pct = None
    if raw.get("percentageOfNodesToScore") is not None:
        pct = _int(raw, "percentageOfNodesToScore", where, 0, 0, 100)
    plugins = parse_plugins(
        raw.get("plugins"),
        f"{where}.plugins",
        points=tuple(EXTENSION_POINTS),
        defaults=default_plugins(registered),
        front_end="koord-scheduler",
    )
    for point, ps in plugins.items():
        for ref in ps.enabled:
            if ref.name in NOT_IMPLEMENTED:
                raise ConfigError(
                    f"{where}.plugins.{point}: {ref.name} is a kube-scheduler plugin koord-scheduler does "
                    "not implement; disable it or schedule such pods with kube-scheduler"
                )
    return Profile(
        scheduler_name=name,
        plugins=plugins,
        plugin_config=plugin_config(raw.get("pluginConfig"), f"{where}.pluginConfig"),
        percentage_of_nodes_to_score=pct,
    )


def parse_configuration(
    doc: Any, source: str = "config", *, registered: frozenset[str] | None = None
) -> SchedulerConfiguration:
    """A decoded KubeSchedulerConfiguration (``None``: every default); ``registered`` limits the default
    plugins to those the registry knows."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: want a {KIND} object")
    if doc.get("kind", KIND) != KIND:
        raise ConfigError(f"{source}: kind {doc.get('kind')!r}: want {KIND}")
    api_version = str(doc.get("apiVersion", f"{API_GROUP}/v1"))
    if api_version != f"{API_GROUP}/v1":
        raise ConfigError(f"{source}: apiVersion {api_version!r}: want {API_GROUP}/v1")
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}")
    if doc.get("extenders"):
        raise ConfigError(
            f"{source}: extenders: koord-scheduler calls no extenders; its plugins run in the framework "
            "(to extend kube-scheduler, run koord-scheduler-extender beside it)"
        )
    raw_profiles = doc.get("profiles")
    if raw_profiles is None or raw_profiles == []:
        raw_profiles = [{}]
    if not isinstance(raw_profiles, list):
        raise ConfigError(f"{source}: profiles: want a list")
    profiles = tuple(_profile(p, f"{source}: profiles[{i}]", registered) for i, p in enumerate(raw_profiles))
    names = [p.scheduler_name for p in profiles]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(f"{source}: profiles[{i}].schedulerName: duplicate {n!r}")
    client = doc.get("clientConnection") or {}
    if not isinstance(client, Mapping):
        raise ConfigError(f"{source}: clientConnection: want an object")
    if set(client) - _CLIENT:
        extra = ", ".join(sorted(set(client) - _CLIENT))
        raise ConfigError(f"{source}: clientConnection: unknown field(s) {extra}")
    initial = _int(doc, "podInitialBackoffSeconds", source, 1, 1)
    maximum = _int(doc, "podMaxBackoffSeconds", source, 10, 1)
    if maximum < initial:
        raise ConfigError(
            f"{source}.podMaxBackoffSeconds: {maximum} must be greater than or equal to "
            "podInitialBackoffSeconds"
        )
    leader_elect, election = parse_leader_election(doc.get("leaderElection"), source)
    qps = client.get("qps", 0.0)
    if isinstance(qps, bool) or not isinstance(qps, int | float):
        raise ConfigError(f"{source}.clientConnection.qps: want a number")
    # kube-scheduler's defaulting: 0 (or absent) is its own 50/100; a negative qps is client-go's
    # "no limit".
    burst = _int(client, "burst", f"{source}.clientConnection", 0, 0)
    return SchedulerConfiguration(
        profiles=profiles,
        percentage_of_nodes_to_score=_int(doc, "percentageOfNodesToScore", source, 0, 0, 100),
        parallelism=_int(doc, "parallelism", source, 16, 1),
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        leader_elect=leader_elect,
        election=election,
        kubeconfig=str(client.get("kubeconfig") or ""),
        qps=float(qps) or 50.0,
        burst=burst or 100,
    )


def load_configuration(path: str, *, registered: frozenset[str] | None = None) -> SchedulerConfiguration:
    return parse_configuration(read_config_file(path), f"--config {path}", registered=registered)
