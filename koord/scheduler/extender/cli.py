"""The ``koord-scheduler-extender`` command: flags, then serve until SIGTERM/SIGINT.

``--config`` is a KubeSchedulerConfiguration holding the extender's one profile; without it,
LoadAwareScheduling runs with Koordinator's code defaults. ``--list-plugins`` prints every registered
plugin (built-in and entry points) and the points the profile enables it at, then exits. Bad flags,
configuration or plugin args exit 2 with a message naming the problem.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import click
from prometheus_client import CollectorRegistry

from koord.scheduler.extender.app import ExtenderApp, ExtenderConfig, check_profile, load
from koord.scheduler.plugins import plugin_registry
from koordshared.kube import process
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.httpaccess import TLSConfig

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
ENV = "KOORD_SCHEDULER_EXTENDER"
PROG = "koord-scheduler-extender"


def _env(name: str) -> str:
    return process.env_var(ENV, name)


def build_config(values: dict[str, Any]) -> ExtenderConfig:
    cert, key, ca = values["tls_cert_file"], values["tls_private_key_file"], values["client_ca_file"]
    if bool(cert) != bool(key):
        raise ConfigError("--tls-cert-file and --tls-private-key-file go together")
    if ca and not cert:
        raise ConfigError("--client-ca-file needs --tls-cert-file and --tls-private-key-file")
    return ExtenderConfig(
        addr=process.parse_addr(values["addr"]),
        kubeconfig=values["kubeconfig"],
        config_file=values["config"],
        tls=TLSConfig(cert, key, ca) if cert else None,
        bind_timeout=process.parse_seconds(values["bind_timeout"], "--bind-timeout"),
        sync_timeout=process.parse_seconds(values["sync_timeout"], "--sync-timeout"),
    )


def plugins_table(cfg: ExtenderConfig) -> str:
    registry = plugin_registry()
    framework = check_profile(load(cfg), registry)
    rows = [("NAME", "SOURCE", "ENABLED AT")]
    for entry in registry.entries():
        points = [
            f"{point}" + (f"(weight {e.weight})" if point == "score" else "")
            for point, enabled in framework.points.items()
            for e in enabled
            if e.name == entry.name
        ]
        rows.append((entry.name, entry.source, ",".join(points) or "-"))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}" for r in rows)


@click.command(PROG, context_settings=CONTEXT)
@process.common_options(ENV, "127.0.0.1:10262")
@click.option(
    "--config", default="", envvar=_env("config"), help="KubeSchedulerConfiguration with the profile"
)
@click.option(
    "--tls-cert-file", default="", envvar=_env("tls-cert-file"), help="serve HTTPS with this certificate"
)
@click.option("--tls-private-key-file", default="", envvar=_env("tls-private-key-file"))
@click.option(
    "--client-ca-file",
    default="",
    envvar=_env("client-ca-file"),
    help="require client certificates signed by it",
)
@click.option(
    "--bind-timeout",
    default="4s",
    envvar=_env("bind-timeout"),
    show_default=True,
    help="timeout of the API binding (keep it below the extender httpTimeout of kube-scheduler)",
)
@click.option("--sync-timeout", default="60s", envvar=_env("sync-timeout"), show_default=True)
@click.option("--list-plugins", is_flag=True, help="print the registered plugins and the profile, then exit")
def main(verbosity: int, log_format: str, list_plugins: bool, **values: Any) -> None:
    """koord-scheduler-extender: kube-scheduler HTTP extender hosting scheduling-framework plugins
    (LoadAwareScheduling first)."""
    from koordshared.runtime import logs

    try:
        cfg = build_config(values)
        if list_plugins:
            click.echo(plugins_table(cfg))
            return
    except (ConfigError, PluginError) as err:
        raise click.UsageError(str(err)) from err
    logs.setup(verbosity, log_format)
    process.main_guard(lambda stop: run(cfg, stop))


def run(cfg: ExtenderConfig, stop: threading.Event, registry: CollectorRegistry | None = None) -> int:
    try:
        app = ExtenderApp(cfg, registry or CollectorRegistry())
    except PluginError as err:
        raise ConfigError(str(err)) from err
    try:
        return app.run(stop)
    finally:
        app.close()


def entry(argv: Sequence[str] | None = None) -> None:
    main.main(args=list(argv) if argv is not None else None, prog_name=PROG)
