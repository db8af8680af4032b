"""Agent configuration: koordlet's flag names, one table, and the frozen :class:`Configuration`.

:func:`build` is the one place flags become component configs (``ExecutorConfig``, ``MetricCacheConfig``,
``InformerConfig``, ``AdvisorConfig``, ``QOSManagerConfig``); the daemon hands each component its own.

Every agent flag is an ``api.Flag`` (the same type plugins use), turned into a click option by ``cli``.
Precedence: command-line flag > ``KOORDLET_<FLAG>`` environment variable > ``--config`` YAML file (same
keys) > default. Float flags are seconds and also accept Go durations (``500ms``, ``1s``, ``2m``).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordlet.api import AgentOptions, Flag, OptionValue
from koordlet.metriccache.config import MetricCacheConfig
from koordlet.metricsadvisor.config import AdvisorConfig
from koordlet.prediction.server import PredictionConfig
from koordlet.qosmanager.config import QOSManagerConfig
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.runtimehooks.config import HooksConfig
from koordlet.statesinformer.config import InformerConfig
from koordlet.system import paths as syspaths
from koordshared.apis.meta import quantity
from koordshared.runtime.configfile import read_config_file
from koordshared.runtime.errors import ConfigError, InvalidValue
from koordshared.runtime.httpaccess import AUTH_FLAGS

MIN_COLLECT_INTERVAL = 0.1
"""koordlet refuses anything under 1 s; we allow down to 100 ms for fast reaction."""

AGENT_FLAGS: tuple[Flag[OptionValue], ...] = (
    Flag("addr", str, "127.0.0.1:9316", "HTTP address for /metrics, /healthz, /readyz, /nodemetric, /events"),
    Flag("enable-pprof", bool, False, "serve CPU profiles and thread stacks on --pprof-addr"),
    Flag("pprof-addr", str, "127.0.0.1:9317", "HTTP address for /debug/pprof/* (with --enable-pprof)"),
    Flag("feature-gates", str, "", "koordlet feature gates: Name=true,... (AllAlpha, AllBeta accepted)"),
    Flag("qos-extension-plugins", str, "", "extension plugin gates: Name=true,..."),
    Flag("node-name", str, "", "node name (env NODE_NAME; hostname when standalone)"),
    Flag("standalone", bool, False, "run without a cluster: pods from cgroups, NodeSLO from a file"),
    Flag("kubeconfig", str, "", "kubeconfig file (in-cluster config when empty)"),
    Flag("dry-run", bool, False, "compute and log QoS decisions; never write cgroups or evict"),
    Flag("cgroup-root-dir", str, syspaths.DEFAULT_CGROUP_ROOT, "cgroup mount root"),
    Flag("proc-root-dir", str, syspaths.DEFAULT_PROC_ROOT, "procfs root"),
    Flag("sys-root-dir", str, syspaths.DEFAULT_SYS_ROOT, "sysfs root"),
    Flag("sys-fs-root-dir", str, syspaths.DEFAULT_SYS_FS_ROOT, "root holding resctrl"),
    Flag("var-run-root-dir", str, syspaths.DEFAULT_VAR_RUN_ROOT, "var-run root (standalone NodeMetric file)"),
    Flag(
        "var-lib-kubelet-dir", str, syspaths.DEFAULT_VAR_LIB_KUBELET, "kubelet root dir (CPU manager state)"
    ),
    Flag("cgroup-root", str, "/", "kubelet's --cgroup-root: parent of the kubepods tree"),
    Flag("cgroup-driver", str, "", "cgroupfs or systemd (detected when empty)"),
    Flag("collect-res-used-interval", float, 1.0, "resource usage collection interval (>= 100ms)"),
    Flag(
        "fast-sample-interval", float, 0.04, "node-level fast sampling interval for QoS reaction (0 disables)"
    ),
    Flag(
        "fast-sample-own-cpu",
        bool,
        True,
        "fast samples keep the agent's own CPU at its 1 s average (its bursts are not LS load)",
    ),
    Flag("collect-sys-metric-outdated-interval", float, 10.0, "staleness bound for shared node state"),
    Flag("psi-collector-interval", float, 10.0, "PSI collection interval"),
    Flag("cpi-collector-interval", float, 60.0, "CPI collection interval (gate CPICollector)"),
    Flag("collect-cpi-timewindow", float, 10.0, "how long each CPI count runs"),
    Flag("enable-resctrl-collector", bool, False, "resctrl LLC/bandwidth (with gate ResctrlCollector)"),
    Flag("resctrl-collector-interval", float, 10.0, "resctrl monitoring interval"),
    Flag("enable-pagecache-collector", bool, False, "collect memory usage with page cache"),
    Flag("reconcile-interval-seconds", int, 1, "reconcile interval of QoS strategies"),
    Flag("resource-force-update-seconds", int, 60, "re-apply owned cgroup values this often"),
    Flag("only-evict-by-api", bool, False, "evict with the Eviction API instead of killing processes"),
    Flag("kubelet-preferred-address-type", str, "InternalIP", "node address type used to reach the kubelet"),
    Flag("kubelet-sync-interval", float, 10.0, "pod sync interval from the kubelet"),
    Flag("kubelet-sync-timeout", float, 3.0, "kubelet request timeout"),
    Flag("kubelet-insecure-tls", bool, False, "use the kubelet read-only port over plain HTTP"),
    Flag("kubelet-read-only-port", int, 10255, "kubelet read-only port"),
    Flag(
        "kubelet-token-file",
        str,
        "",
        "bearer token file for the kubelet, re-read per request (empty: the service-account token in a "
        "pod, the --kubeconfig user's credentials outside one)",
    ),
    Flag(
        "kubelet-certificate-authority",
        str,
        "",
        "CA file to verify the kubelet's serving certificate (empty: not verified, as koordlet)",
    ),
    Flag("pod-list", str, "", "standalone: PodList JSON file or URL enriching cgroup-discovered pods"),
    Flag("node-slo-file", str, "", "standalone: NodeSLO YAML/JSON file, reloaded when it changes"),
    Flag("enable-node-metric-report", bool, True, "report NodeMetric status"),
    Flag("node-topology-sync-interval", float, 3.0, "node topology (NodeResourceTopology) sync interval"),
    Flag(
        "disable-query-kubelet-config", bool, False, "do not ask the kubelet's /configz for its CPU manager"
    ),
    Flag("runtime-hooks-reconcile-interval", float, 10.0, "runtime hooks: full reconcile interval"),
    Flag("disable-unset-cpu-quota", bool, False, "runtime hooks: keep the CFS quota of pods bound to CPUs"),
    Flag(
        "node-metric-report-min-interval",
        float,
        30.0,
        "floor of the NodeMetric report interval (koordlet's 30 s); status writes may go as often",
    ),
    Flag("tsdb-path", str, "/var/lib/koordlet/metric-data", "metric cache persistence directory"),
    Flag("tsdb-max-bytes", int, 100 * 1024 * 1024, "bound of the persisted metric cache"),
    Flag("audit-max-events-limit", int, 2048, "audit events kept in memory for /events"),
    Flag(
        "prediction-checkpoint-filepath",
        str,
        "",
        "prediction model checkpoints (empty: prediction-checkpoints next to --tsdb-path)",
    ),
    Flag("prediction-cold-start-duration", float, 24 * 3600.0, "pods younger than this are not predicted"),
    Flag("prediction-safety-margin-percent", int, 10, "margin added to predicted peaks"),
    Flag("prediction-memory-histogram-decay-halflife", float, 24 * 3600.0, "memory model half-life"),
    Flag("prediction-cpu-histogram-decay-halflife", float, 12 * 3600.0, "CPU model half-life"),
    Flag("prediction-training-interval", float, 60.0, "prediction model update period"),
    Flag("prediction-model-expiration-duration", float, 30 * 60.0, "models idle this long are dropped"),
    Flag("prediction-model-checkpoint-interval", float, 10 * 60.0, "a model is checkpointed this often"),
    Flag("prediction-model-checkpoint-max-per-step", int, 12, "models checkpointed per minute at most"),
    Flag("log-format", str, "text", "text or json"),
    # TLS and who may call the HTTP endpoints: kubelet's flags, shared with the cluster processes.
    *AUTH_FLAGS,
)

_ADDR_HOST = re.compile(r"^(|[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])\Z")
"""An IPv4 address, a host name or a bracketed IPv6 address (an unexpanded ``$(POD_IP)`` is refused)."""


def parse_seconds(text: object) -> float:
    """``1.5``, ``"1.5"``, ``"500ms"``, ``"1m30s"`` → seconds."""
    try:
        return quantity.parse_seconds(text)
    except InvalidValue as err:
        raise ConfigError(f"not a duration: {text!r} (use seconds or Go syntax like 500ms, 1s, 2m)") from err


def env_name(flag_name: str) -> str:
    return "KOORDLET_" + flag_name.upper().replace("-", "_")


def load_config_file(path: str, known: set[str]) -> dict[str, Any]:
    """Read the ``--config`` YAML (flag names as keys, kebab or snake case); unknown keys are errors."""
    data = read_config_file(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: want a mapping of flag names to values")
    out: dict[str, Any] = {}
    unknown = []
    for key, raw in data.items():
        name = str(key).replace("_", "-")
        if name not in known:
            unknown.append(str(key))
            continue
        value = raw
        if name in ("feature-gates", "qos-extension-plugins") and isinstance(raw, dict):
            value = ",".join(f"{k}={str(v).lower()}" for k, v in raw.items())
        out[name] = value
    if unknown:
        raise ConfigError(f"--config {path}: unknown key(s): {', '.join(sorted(unknown))}")
    return out


@dataclass(frozen=True, slots=True)
class Configuration:
    """The agent's parsed configuration: one frozen config per component, all built by :func:`build`."""

    node_name: str
    addr: str
    pprof_addr: str
    """Where ``/debug/pprof/*`` is served; empty without ``--enable-pprof``."""
    paths: syspaths.HostPaths
    executor: ExecutorConfig
    cache: MetricCacheConfig
    informer: InformerConfig
    advisor: AdvisorConfig
    qos: QOSManagerConfig
    prediction: PredictionConfig
    hooks: HooksConfig
    options: Mapping[str, OptionValue]
    """Every flag's parsed value by name, the plugins' flags included."""

    @property
    def host(self) -> str:
        """The address to bind: ``:9316`` (no host, koordlet's chart) is every interface, as in Go."""
        return split_address(self.addr)[0]

    @property
    def port(self) -> int:
        return split_address(self.addr)[1]


def split_address(addr: str) -> tuple[str, int]:
    """A validated ``host:port`` to bind (no host: every interface)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def _address(flag: str, addr: str, example: str) -> str:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdecimal() or not 0 <= int(port) <= 65535 or not _ADDR_HOST.match(host):
        raise ConfigError(f"--{flag} {addr!r}: want host:port with an IP or host name, e.g. {example}")
    return addr


def build(options: Mapping[str, object], environ: Mapping[str, str] | None = None) -> Configuration:
    """Validate parsed option values into a :class:`Configuration` (raises :class:`ConfigError`)."""
    env = os.environ if environ is None else environ
    o = options

    def seconds(name: str) -> float:
        return parse_seconds(o[name])

    def integer(name: str) -> int:
        value = o[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"--{name} {value!r}: want an integer")
        return value

    collect = seconds("collect-res-used-interval")
    if collect < MIN_COLLECT_INTERVAL:
        raise ConfigError(f"--collect-res-used-interval={collect}s is below the minimum 100ms")
    addr = _address("addr", str(o["addr"]), "127.0.0.1:9316")
    pprof_addr = _address("pprof-addr", str(o["pprof-addr"]), "127.0.0.1:9317") if o["enable-pprof"] else ""
    driver = str(o["cgroup-driver"])
    if driver not in ("", "cgroupfs", "systemd"):
        raise ConfigError(f"--cgroup-driver {driver!r}: want cgroupfs or systemd")
    if str(o["log-format"]) not in ("text", "json"):
        raise ConfigError(f"--log-format {o['log-format']!r}: want text or json")
    node = str(o["node-name"]) or env.get("NODE_NAME", "")
    standalone = bool(o["standalone"])
    if not node:
        if not standalone and env.get("KUBERNETES_SERVICE_HOST"):
            raise ConfigError("NODE_NAME is empty: set it from spec.nodeName in the DaemonSet")
        node = socket.gethostname()
    dry_run = bool(o["dry-run"])
    tsdb = str(o["tsdb-path"])
    report_floor = seconds("node-metric-report-min-interval")
    if not report_floor > 0:
        raise ConfigError("--node-metric-report-min-interval must be positive")
    return Configuration(
        node_name=node,
        addr=addr,
        pprof_addr=pprof_addr,
        paths=syspaths.HostPaths(
            cgroup_root=Path(str(o["cgroup-root-dir"])),
            proc_root=Path(str(o["proc-root-dir"])),
            sys_root=Path(str(o["sys-root-dir"])),
            sys_fs_root=Path(str(o["sys-fs-root-dir"])),
            var_run_root=Path(str(o["var-run-root-dir"])),
            var_lib_kubelet=Path(str(o["var-lib-kubelet-dir"])),
            cgroup_parent=str(o["cgroup-root"]) or "/",
            cgroup_driver=driver,
        ),
        executor=ExecutorConfig(
            force_update_seconds=float(integer("resource-force-update-seconds")),
            dry_run=dry_run,
            audit_size=integer("audit-max-events-limit"),
        ),
        cache=MetricCacheConfig(
            tsdb_path=Path(tsdb) if tsdb else None,
            tsdb_max_bytes=integer("tsdb-max-bytes"),
            collect_interval=collect,
        ),
        informer=InformerConfig(
            node_name=node,
            standalone=True if standalone else None,
            kubeconfig=str(o["kubeconfig"]),
            kubelet_preferred_address_type=str(o["kubelet-preferred-address-type"]),
            kubelet_read_only_port=integer("kubelet-read-only-port"),
            kubelet_insecure_tls=bool(o["kubelet-insecure-tls"]),
            kubelet_token_file=str(o["kubelet-token-file"]),
            kubelet_ca_file=str(o["kubelet-certificate-authority"]),
            kubelet_sync_interval=seconds("kubelet-sync-interval"),
            kubelet_sync_timeout=seconds("kubelet-sync-timeout"),
            pod_list=str(o["pod-list"]),
            node_slo_file=str(o["node-slo-file"]),
            enable_node_metric_report=bool(o["enable-node-metric-report"]),
            report_interval_min_seconds=report_floor,
            # The write limiter (0.1/s) guards against storms; a lower floor is a deliberate choice.
            status_qps=max(0.1, 1.0 / report_floor),
            node_topology_sync_interval=seconds("node-topology-sync-interval"),
            query_kubelet_config=not bool(o["disable-query-kubelet-config"]),
        ),
        advisor=AdvisorConfig(
            node_name=node,
            collect_interval=collect,
            be_interval=collect,
            fast_sample_interval=seconds("fast-sample-interval"),
            fast_sample_own_cpu=bool(o["fast-sample-own-cpu"]),
            psi_interval=seconds("psi-collector-interval"),
            cpi_interval=seconds("cpi-collector-interval"),
            cpi_window=seconds("collect-cpi-timewindow"),
            resctrl_enabled=bool(o["enable-resctrl-collector"]),
            resctrl_interval=seconds("resctrl-collector-interval"),
            page_cache=bool(o["enable-pagecache-collector"]),
            host_app_interval=collect,
            sys_metric_outdated_interval=seconds("collect-sys-metric-outdated-interval"),
        ),
        qos=QOSManagerConfig(
            agent=AgentOptions(
                reconcile_interval=float(integer("reconcile-interval-seconds")), collect_interval=collect
            ),
            only_evict_by_api=bool(o["only-evict-by-api"]),
            dry_run=dry_run,
        ),
        prediction=_prediction(o, seconds, integer, tsdb),
        hooks=HooksConfig(
            reconcile_interval=seconds("runtime-hooks-reconcile-interval"),
            unset_cpu_quota=not bool(o["disable-unset-cpu-quota"]),
        ),
        options={k: v for k, v in o.items() if isinstance(v, bool | int | float | str)},
    )


def _prediction(o: Mapping[str, object], seconds: Any, integer: Any, tsdb: str) -> PredictionConfig:
    path = str(o["prediction-checkpoint-filepath"])
    if not path and tsdb:
        path = str(Path(tsdb).parent / "prediction-checkpoints")  # koordlet: /metric-data/ -> /prediction-...
    margin = integer("prediction-safety-margin-percent")
    if margin < 0:
        raise ConfigError(f"--prediction-safety-margin-percent={margin}: want 0 or more")
    return PredictionConfig(
        checkpoint_path=path,
        cold_start_seconds=seconds("prediction-cold-start-duration"),
        safety_margin_percent=margin,
        memory_half_life=seconds("prediction-memory-histogram-decay-halflife"),
        cpu_half_life=seconds("prediction-cpu-histogram-decay-halflife"),
        training_interval=seconds("prediction-training-interval"),
        model_expiration=seconds("prediction-model-expiration-duration"),
        checkpoint_interval=seconds("prediction-model-checkpoint-interval"),
        checkpoint_max_per_step=integer("prediction-model-checkpoint-max-per-step"),
    )
