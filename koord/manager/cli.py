"""The ``koord-manager`` command: flags (koord-manager's names where it has one), then run until stopped;
``koord-manager top nodes`` is the cluster view (:mod:`koord.manager.top`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

import click
from prometheus_client import CollectorRegistry

from koord.manager import config
from koordshared.kube import process
from koordshared.runtime.errors import ConfigError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
ENV = "KOORD_MANAGER"


def _env(name: str) -> str:
    return process.env_var(ENV, name)


@click.command("koord-manager", context_settings=CONTEXT)
@process.common_options(ENV, "0.0.0.0:8080")
@click.option(
    "--controllers",
    default="*",
    envvar=_env("controllers"),
    show_default=True,
    help=f"controllers to run: names, '*' for all, '-name' leaves one out ({', '.join(config.CONTROLLERS)})",
)
@click.option(
    "--config-namespace", default="koordinator-system", envvar=_env("config-namespace"), show_default=True
)
@click.option(
    "--slo-config-name", default="slo-controller-config", envvar=_env("slo-config-name"), show_default=True
)
@click.option(
    "--enable-leader-election/--disable-leader-election",
    default=True,
    envvar=_env("enable-leader-election"),
    show_default=True,
)
@click.option(
    "--leader-election-namespace",
    default="koordinator-system",
    envvar=_env("leader-election-namespace"),
    show_default=True,
)
@click.option(
    "--leader-election-id",
    default="koordinator-manager",
    envvar=_env("leader-election-id"),
    show_default=True,
)
@process.election_options(ENV, "--leader-election-identity")
@click.option(
    "--leader-elect-lease-duration",
    default="15s",
    envvar=_env("leader-elect-lease-duration"),
    show_default=True,
)
@click.option(
    "--leader-elect-renew-deadline",
    default="10s",
    envvar=_env("leader-elect-renew-deadline"),
    show_default=True,
)
@click.option(
    "--leader-elect-retry-period", default="2s", envvar=_env("leader-elect-retry-period"), show_default=True
)
@click.option(
    "--workers", default=2, type=int, envvar=_env("workers"), show_default=True, help="workers per controller"
)
@click.option(
    "--sync-period",
    default="0",
    envvar=_env("sync-period"),
    show_default=True,
    help="re-reconcile every node this often (0: only on events)",
)
def main(verbosity: int, log_format: str, **values: Any) -> None:
    """koord-manager: NodeMetric, NodeSLO and batch-resource controllers (Koordinator's slo-controller)."""
    from koordshared.runtime import logs

    options = {k.replace("_", "-"): v for k, v in values.items()}
    try:
        cfg = config.build(options)
    except ConfigError as err:
        raise click.UsageError(str(err)) from err
    logs.setup(verbosity, log_format)
    process.main_guard(lambda stop: run(cfg, stop))


def run(cfg: config.ManagerConfig, stop: threading.Event, registry: CollectorRegistry | None = None) -> int:
    """Run koord-manager until ``stop``; the process exit code."""
    from koord.manager.app import Manager

    manager = Manager(cfg, registry or CollectorRegistry())
    try:
        return process.serve(
            "koord-manager",
            manager.components(),
            cfg.addr,
            manager.metrics.registry,
            stop,
            sync_timeout=cfg.sync_timeout,
        )
    finally:
        manager.close()


def entry(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["top"]:  # a view for people, beside the controller's flags (koord.manager.top)
        from koord.manager.top import top

        top.main(args=args[1:], prog_name="koord-manager top")
    else:
        main.main(args=args, prog_name="koord-manager")
