"""The ``koord-descheduler`` command: flags (Kubernetes component-base names for leader election), the
``--config`` DeschedulerConfiguration, then rounds until SIGTERM/SIGINT (or one round when the
configuration sets no ``deschedulingInterval``).

``--list-plugins`` prints every registered plugin (built-in and entry points) and where each profile
enables it, then exits. Unknown plugins, invalid plugin args and malformed configuration exit 2 with a
message naming the profile, the plugin and the field.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import click
from prometheus_client import CollectorRegistry

from koord.descheduler import config
from koordshared.kube import process
from koordshared.runtime.errors import ConfigError, PluginError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
ENV = "KOORD_DESCHEDULER"
PROG = "koord-descheduler"


def _env(name: str) -> str:
    return process.env_var(ENV, name)


@click.command(PROG, context_settings=CONTEXT)
@process.common_options(ENV, config.DEFAULT_ADDR)
@click.option(
    "--config", default="", envvar=_env("config"), help="DeschedulerConfiguration (descheduler/v1alpha2)"
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=None,
    envvar=_env("leader-elect"),
    help="elect a leader on a Lease before descheduling [default: the config's leaderElection, else on]",
)
@click.option("--leader-elect-lease-duration", default=None, envvar=_env("leader-elect-lease-duration"))
@click.option("--leader-elect-renew-deadline", default=None, envvar=_env("leader-elect-renew-deadline"))
@click.option("--leader-elect-retry-period", default=None, envvar=_env("leader-elect-retry-period"))
@click.option(
    "--leader-elect-resource-name",
    default=None,
    envvar=_env("leader-elect-resource-name"),
    help="the Lease's name",
)
@click.option(
    "--leader-elect-resource-namespace", default=None, envvar=_env("leader-elect-resource-namespace")
)
@process.election_options(ENV, "--leader-elect-identity")
@click.option("--sync-timeout", default="60s", envvar=_env("sync-timeout"), show_default=True)
@click.option("--list-plugins", is_flag=True, help="print the registered plugins and the profiles, then exit")
def main(verbosity: int, log_format: str, list_plugins: bool, **values: Any) -> None:
    """koord-descheduler: Koordinator's descheduler framework (LowNodeLoad first) on the Eviction API.
    Without --addr, the config's metricsBindAddress (if any) is served."""
    from koord.descheduler.app import check_profiles, describe, plugin_registry
    from koordshared.runtime import logs

    options = {k.replace("_", "-"): v for k, v in values.items()}
    if click.get_current_context().get_parameter_source("addr") is click.core.ParameterSource.DEFAULT:
        options["addr"] = None  # the config's bind address, if it has one, else the default
    try:
        cfg = config.build(options)
        if list_plugins:
            registry = plugin_registry()
            check_profiles(cfg.configuration, registry)
            click.echo(describe(registry, cfg.configuration))
            return
    except (ConfigError, PluginError) as err:
        raise click.UsageError(str(err)) from err
    logs.setup(verbosity, log_format)
    process.main_guard(lambda stop: run(cfg, stop))


def run(
    cfg: config.DeschedulerConfig, stop: threading.Event, registry: CollectorRegistry | None = None
) -> int:
    """Run koord-descheduler until ``stop``; the process exit code."""
    from koord.descheduler.app import Descheduler

    try:
        app = Descheduler(cfg, registry or CollectorRegistry())
    except PluginError as err:
        raise ConfigError(str(err)) from err
    try:
        return process.serve(
            PROG, app.components(), cfg.addr, app.metrics.registry, stop, sync_timeout=cfg.sync_timeout
        )
    finally:
        app.close()


def entry(argv: Sequence[str] | None = None) -> None:
    main.main(args=list(argv) if argv is not None else None, prog_name=PROG)
