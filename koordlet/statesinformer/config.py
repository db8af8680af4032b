"""``InformerConfig``: everything the states informer is told (flags of ``koordlet run``), frozen.

Defaults are koordlet's: kubelet on the Node's kubelet port with the agent's API credentials,
``--kubelet-sync-interval`` 10 s, ``--kubelet-sync-timeout`` 3 s, NodeMetric reports at least 30 s apart
and status writes limited to 0.1 QPS with a burst of 2. Tests shorten the intervals through the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koordshared import __version__
from koordshared.runtime.errors import ConfigError

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True, slots=True)
class InformerConfig:
    node_name: str
    """``NODE_NAME``: this node; the name of its NodeSLO and NodeMetric."""
    standalone: bool | None = None
    """True: no cluster; False: cluster required; None: standalone when no credentials are found
    (no ``KUBERNETES_SERVICE_HOST``, no kubeconfig, no ``client_configuration``)."""
    kubeconfig: str = ""
    client_configuration: Any = None
    """A ready ``kubernetes.client.Configuration`` (tests, embedding); wins over ``kubeconfig``."""
    pod_source: str = "kubelet"
    """Cluster mode pod source: ``kubelet`` (``/pods``, koordlet's way) or ``api`` (list+watch with
    ``fieldSelector=spec.nodeName``)."""
    kubelet_address: str = ""
    """Override of the kubelet address; empty = the Node's ``kubelet_preferred_address_type`` address."""
    kubelet_preferred_address_type: str = "InternalIP"
    kubelet_port: int = 0
    """HTTPS port; 0 = the Node's ``daemonEndpoints.kubeletEndpoint.port``, else 10250."""
    kubelet_read_only_port: int = 10255
    kubelet_insecure_tls: bool = False
    """``--kubelet-insecure-tls``: plain HTTP on the read-only port without a token."""
    kubelet_token_file: str = ""
    """``--kubelet-token-file``: a bearer token for the kubelet, re-read on every request; empty = the
    agent's API credentials (the service-account token in a pod, else the kubeconfig's user:
    :mod:`koordlet.statesinformer.kubeletauth`)."""
    kubelet_ca_file: str = ""
    """``--kubelet-certificate-authority``: CA of the kubelet serving certificate; empty = not verified
    (koordlet's default)."""
    kubelet_sync_interval: float = 10.0
    kubelet_sync_timeout: float = 3.0
    pods_staleness_seconds: float = 0.0
    """After this long without a good pod list the informer is degraded; 0 = 2 x the sync interval."""
    pleg: bool = True
    """Watch the kubepods tiers with inotify for early pod refreshes (5/s, burst 10)."""
    pod_list: str = ""
    """``--pod-list``: standalone enrichment, a PodList file (JSON/YAML) or http(s) URL."""
    node_slo_file: str = ""
    """``--node-slo-file``: standalone NodeSLO (object or spec, YAML/JSON), reloaded on change."""
    node_slo_file_check_seconds: float = 2.0
    enable_node_metric_report: bool = True
    create_node_metric: bool = False
    """Create the NodeMetric when absent (normally slo-controller does; koordlet never does)."""
    report_interval_min_seconds: float = 30.0
    """Floor of the report interval (koordlet: 30 s); tests lower it."""
    default_report_interval_seconds: float = 60.0
    status_qps: float = 0.1
    status_burst: int = 2
    max_backoff_seconds: float = 30.0
    watch_timeout_seconds: int = 300
    request_timeout_seconds: float = 10.0
    node_topology_sync_interval: float = 3.0
    """``--node-topology-sync-interval``: the host, the kubelet and the NodeResourceTopology are
    re-read this often."""
    query_kubelet_config: bool = True
    """Not ``--disable-query-kubelet-config``: ask the kubelet's ``/configz`` for its CPU manager and
    topology manager settings."""
    node_topology_report: bool = True
    """Gate ``NodeTopologyReport``: create and update this node's NodeResourceTopology."""
    hugepage_report: bool = False
    """Gate ``HugePageReport``: huge pages in the NodeResourceTopology zones."""

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ConfigError("the node name is required (NODE_NAME)")
        if self.pod_source not in ("kubelet", "api"):
            raise ConfigError(f"pod source must be 'kubelet' or 'api', got {self.pod_source!r}")
        for name in (
            "kubelet_sync_interval",
            "kubelet_sync_timeout",
            "node_slo_file_check_seconds",
            "report_interval_min_seconds",
            "default_report_interval_seconds",
            "status_qps",
            "max_backoff_seconds",
            "request_timeout_seconds",
            "node_topology_sync_interval",
        ):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.status_burst < 1 or self.watch_timeout_seconds < 1 or self.pods_staleness_seconds < 0:
            raise ConfigError("status_burst and watch_timeout_seconds must be >= 1, staleness >= 0")

    @property
    def user_agent(self) -> str:
        """What the agent calls itself to the API server and the kubelet (as the cluster processes do:
        name, version and which one), so their logs and audit tell its requests apart."""
        return f"koordlet/{__version__} ({self.node_name})"

    @property
    def staleness(self) -> float:
        return self.pods_staleness_seconds or 2 * self.kubelet_sync_interval
