"""The flags of Kubernetes components (component-base, kube-scheduler's options) that our cluster processes
accept and name once in the log: they mean nothing here, and a manifest written for kube-scheduler or
Koordinator's Go processes passes them.

Our processes serve plain HTTP (the extender optionally TLS with its own flags) and authenticate no callers
of their probes and metrics, so secure serving, delegated authentication and authorization, profiling,
metrics gating and the structured-log flags have no counterpart.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordshared.runtime.goflags import BOOL, VALUE, ForeignTable

COMPONENT_BASE = ForeignTable(
    {
        # secure serving
        "bind-address": VALUE,
        "secure-port": VALUE,
        "cert-dir": VALUE,
        "tls-cert-file": VALUE,
        "tls-private-key-file": VALUE,
        "tls-cipher-suites": VALUE,
        "tls-min-version": VALUE,
        "tls-sni-cert-key": VALUE,
        "permit-port-sharing": BOOL,
        "permit-address-sharing": BOOL,
        "http2-max-streams-per-connection": VALUE,
        # delegated authentication and authorization
        "authentication-kubeconfig": VALUE,
        "authentication-skip-lookup": BOOL,
        "authentication-token-webhook-cache-ttl": VALUE,
        "authentication-tolerate-lookup-failure": BOOL,
        "client-ca-file": VALUE,
        "requestheader-allowed-names": VALUE,
        "requestheader-client-ca-file": VALUE,
        "requestheader-extra-headers-prefix": VALUE,
        "requestheader-group-headers": VALUE,
        "requestheader-username-headers": VALUE,
        "requestheader-uid-headers": VALUE,
        "authorization-kubeconfig": VALUE,
        "authorization-always-allow-paths": VALUE,
        "authorization-webhook-cache-authorized-ttl": VALUE,
        "authorization-webhook-cache-unauthorized-ttl": VALUE,
        # metrics and logs
        "show-hidden-metrics-for-version": VALUE,
        "disabled-metrics": VALUE,
        "allow-metric-labels": VALUE,
        "allow-metric-labels-manifest": VALUE,
        "logging-format": VALUE,
        "log-json-info-buffer-size": VALUE,
        "log-json-split-stream": BOOL,
        "log-text-info-buffer-size": VALUE,
        "log-text-split-stream": BOOL,
        # client and deprecated kube-scheduler options
        "profiling": BOOL,
        "contention-profiling": BOOL,
        "kube-api-qps": VALUE,
        "kube-api-burst": VALUE,
        "kube-api-content-type": VALUE,
        "master": VALUE,
        "write-config-to": VALUE,
        "pod-max-in-unschedulable-pods-duration": VALUE,
    },
    "Kubernetes component flag without effect here: plain HTTP, no delegated auth, no profiling",
)
"""What kube-scheduler's (and Koordinator's scheduler and descheduler's) command lines share."""

LEADER_ELECTION: Mapping[str, str] = {
    "leader-elect": BOOL,
    "leader-elect-lease-duration": VALUE,
    "leader-elect-renew-deadline": VALUE,
    "leader-elect-retry-period": VALUE,
    "leader-elect-resource-lock": VALUE,
    "leader-elect-resource-name": VALUE,
    "leader-elect-resource-namespace": VALUE,
}
"""component-base's leader-election flags, for a process that elects no leader."""
