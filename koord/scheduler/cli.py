"""The ``koord-scheduler`` command: kube-scheduler's flags where they overlap (``--config``,
``--kubeconfig``, ``--leader-elect*``, ``-v``, ``--feature-gates``; Koordinator's Deployment passes
``--port``), so a Deployment runs it by changing the image and the command's name only.

``--list-plugins`` prints every registered plugin and where each profile enables it, then exits. A bad
configuration, an unknown plugin or invalid args exit 2 naming the field. Flags kube-scheduler has that
mean nothing here (``--authentication-*``, ``--authorization-*``, profiling) are accepted and ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import click
from prometheus_client import CollectorRegistry

from koordshared.kube import process
from koordshared.kube.leaderelection import ElectionConfig, default_identity
from koordshared.runtime.errors import ConfigError, PluginError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
ENV = "KOORD_SCHEDULER"
PROG = "koord-scheduler"
DEFAULT_ADDR = "0.0.0.0:10251"
IGNORED = (
    "authentication-skip-lookup",
    "authentication-kubeconfig",
    "authorization-kubeconfig",
    "authorization-always-allow-paths",
    "profiling",
    "contention-profiling",
    "bind-address",
    "secure-port",
)
KNOWN_GATES = frozenset({""})
"""Scheduler feature gates this build accepts (Koordinator's Deployment passes an empty list)."""


def _env(name: str) -> str:
    return process.env_var(ENV, name)


def _ignored(fn: Any) -> Any:
    for name in IGNORED:
        fn = click.option(f"--{name}", "ignored_" + name.replace("-", "_"), default=None, hidden=True)(fn)
    return fn


@click.command(PROG, context_settings=CONTEXT)
@process.common_options(ENV, DEFAULT_ADDR)
@click.option(
    "--config",
    default="",
    envvar=_env("config"),
    help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)",
)
@click.option(
    "--port", type=int, default=None, help="serve HTTP on 0.0.0.0:<port> (Koordinator's flag; --addr wins)"
)
@click.option(
    "--leader-elect/--no-leader-elect", default=None, help="elect a leader on a Lease [default: the config's]"
)
@click.option("--leader-elect-lease-duration", default=None)
@click.option("--leader-elect-renew-deadline", default=None)
@click.option("--leader-elect-retry-period", default=None)
@click.option("--leader-elect-resource-lock", default=None, help="only 'leases'")
@click.option("--leader-elect-resource-name", default=None)
@click.option("--leader-elect-resource-namespace", default=None)
@process.election_options(ENV, "--leader-elect-identity")
@click.option("--feature-gates", default="", help="scheduler feature gates (none are defined yet)")
@click.option("--sync-timeout", default="60s", envvar=_env("sync-timeout"), show_default=True)
@click.option("--list-plugins", is_flag=True, help="print the registered plugins and the profiles, then exit")
@_ignored
def main(verbosity: int, log_format: str, list_plugins: bool, **values: Any) -> None:
    """koord-scheduler: the Kubernetes scheduling framework with Koordinator's plugins, as a second
    scheduler for the pods whose spec.schedulerName is one of its profiles."""
    from koord.scheduler.app import check
    from koord.scheduler.plugins import plugin_registry
    from koordshared.runtime import logs

    options = {k.replace("_", "-"): v for k, v in values.items() if not k.startswith("ignored_")}
    if click.get_current_context().get_parameter_source("addr") is click.core.ParameterSource.DEFAULT:
        options["addr"] = None
    try:
        cfg = build(options)
        registry = plugin_registry()
        check(cfg.configuration, registry)
        if list_plugins:
            click.echo(describe(registry, cfg.configuration))
            return
    except (ConfigError, PluginError) as err:
        raise click.UsageError(str(err)) from err
    logs.setup(verbosity, log_format)
    process.main_guard(lambda stop: run(cfg, stop))


def build(o: dict[str, Any]) -> Any:
    """The process configuration from the option values (flag names with dashes; ``None``: not given)."""
    from koord.scheduler import config
    from koord.scheduler.app import KoordSchedulerConfig

    gates = [g.split("=", 1)[0] for g in str(o.get("feature-gates") or "").split(",") if g.strip()]
    unknown = [g for g in gates if g not in KNOWN_GATES]
    if unknown:
        raise ConfigError(
            f"--feature-gates: unknown gate(s) {', '.join(unknown)}; koord-scheduler defines none"
        )
    registered = frozenset(plugin_registry_names())
    config_file = str(o.get("config") or "")
    conf = (
        config.load_configuration(config_file, registered=registered)
        if config_file
        else config.parse_configuration(None, "default", registered=registered)
    )
    e = conf.election

    def seconds(flag: str, key: str, default: float) -> float:
        if o.get(flag) is not None:
            return process.parse_seconds(o[flag], f"--{flag}")
        return float(e.get(key, default))

    if (o.get("leader-elect-resource-lock") or "leases") != "leases":
        raise ConfigError("--leader-elect-resource-lock: only 'leases' is supported")
    election = ElectionConfig(
        namespace=str(
            o.get("leader-elect-resource-namespace") or e.get("resourceNamespace") or config.LEASE_NAMESPACE
        ),
        name=str(o.get("leader-elect-resource-name") or e.get("resourceName") or config.LEASE_NAME),
        identity=str(o.get("leader-elect-identity") or "") or default_identity(),
        lease_duration=seconds("leader-elect-lease-duration", "leaseDuration", 15.0),
        renew_deadline=seconds("leader-elect-renew-deadline", "renewDeadline", 10.0),
        retry_period=seconds("leader-elect-retry-period", "retryPeriod", 2.0),
    )
    leader = conf.leader_elect if o.get("leader-elect") is None else bool(o["leader-elect"])
    addr = o.get("addr") or (f"0.0.0.0:{o['port']}" if o.get("port") else DEFAULT_ADDR)
    cfg = KoordSchedulerConfig(
        addr=process.parse_addr(str(addr)),
        configuration=conf,
        kubeconfig=str(o.get("kubeconfig") or conf.kubeconfig or ""),
        leader_election=leader,
        election=election,
        request_timeout=process.parse_seconds(o.get("request-timeout") or "3s", "--request-timeout"),
        sync_timeout=process.parse_seconds(o.get("sync-timeout") or "60s", "--sync-timeout"),
    )
    if leader:
        election.validate()
        if cfg.request_timeout >= election.margin:
            # A binding sent just before the leadership deadline must land before anyone else can lead.
            raise ConfigError(
                f"--request-timeout={cfg.request_timeout:g}s must be below the lease duration minus the "
                f"renew deadline ({election.margin:g}s)"
            )
    return cfg


def plugin_registry_names() -> list[str]:
    from koord.scheduler.plugins import plugin_registry

    return plugin_registry().names()


def describe(registry: Any, conf: Any) -> str:
    """``--list-plugins``: every registered plugin, its source, and the profiles and points enabling it."""
    from koord.scheduler.app import check

    frameworks = check(conf, registry)
    rows = [("NAME", "SOURCE", "ENABLED")]
    for entry in registry.entries():
        where = [
            f"{name}:{point}"
            for name, fw in frameworks.items()
            for point, enabled in fw.points.items()
            if any(e.name == entry.name for e in enabled)
        ]
        rows.append((entry.name, entry.source, ",".join(where) or "-"))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" for r in rows)


def run(cfg: Any, stop: threading.Event, registry: CollectorRegistry | None = None) -> int:
    """Run koord-scheduler until ``stop``; the process exit code."""
    from koord.scheduler.app import KoordScheduler

    try:
        app = KoordScheduler(cfg, registry or CollectorRegistry())
    except PluginError as err:
        raise ConfigError(str(err)) from err
    try:
        return process.serve(
            PROG,
            app.components(),
            cfg.addr,
            app.registry,
            stop,
            sync_timeout=cfg.sync_timeout,
            routes={"/debug/explain": app.explain},
        )
    finally:
        app.close()


def entry(argv: Sequence[str] | None = None) -> None:
    main.main(args=list(argv) if argv is not None else None, prog_name=PROG)
