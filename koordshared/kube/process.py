"""What every cluster process shares: common flags, ``--addr`` HTTP (``/healthz``, ``/readyz``,
``/metrics`` on an injected registry), signals and the graceful stop.

A process is a list of components run by :class:`~koordshared.runtime.lifecycle.Daemon`, as the agent's are
(start in order, each waited for until synced; ``/readyz`` once all are; stop in reverse with a deadline;
a dead root thread exits non-zero so the Deployment restarts the pod). The flags keep the names the agent uses
(``--kubeconfig``, ``--addr``, ``-v``, ``--log-format``).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from prometheus_client import CollectorRegistry

from koordshared.apis.meta import quantity
from koordshared.runtime.errors import ConfigError, InvalidValue
from koordshared.runtime.httpserver import ProcessHTTPServer, Route
from koordshared.runtime.lifecycle import Component, Daemon, Supervisor, install_signals

F = TypeVar("F", bound=Callable[..., Any])
_ADDR_HOST = re.compile(r"^(|[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])\Z")


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int


def parse_addr(text: str, flag: str = "--addr") -> Address:
    """``host:port`` (an empty host listens on every interface, as Go's ``:8080``)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdecimal() or not 0 <= int(port) <= 65535 or not _ADDR_HOST.match(host):
        raise ConfigError(f"{flag} {text!r}: want host:port with an IP or host name, e.g. 0.0.0.0:8080")
    return Address(host.strip("[]") or "0.0.0.0", int(port))


def parse_seconds(text: object, flag: str) -> float:
    """Seconds from a number or a Go duration (``15s``, ``1m30s``), never negative (every duration flag is
    an interval, a timeout or a lease, as the agent's); :class:`ConfigError` naming ``flag``."""
    try:
        seconds = quantity.parse_seconds(text)
    except InvalidValue as err:
        raise ConfigError(f"{flag} {text!r}: want seconds or a Go duration like 15s") from err
    if seconds < 0:
        raise ConfigError(f"{flag} {text!r} is negative: a duration here is an interval, a timeout, a lease")
    return seconds


def env_var(env_prefix: str, flag: str) -> str:
    """A flag's environment variable: ``<PREFIX>_<FLAG>`` (``sync-timeout`` -> ``..._SYNC_TIMEOUT``)."""
    return f"{env_prefix}_{flag.upper().replace('-', '_')}"


def common_options(env_prefix: str, default_addr: str) -> Callable[[F], F]:
    """The options every cluster process takes; environment variables ``<PREFIX>_<FLAG>``."""

    def env(name: str) -> str:
        return env_var(env_prefix, name)

    def decorate(fn: F) -> F:
        opts = [
            click.option(
                "--kubeconfig",
                default="",
                envvar=["KUBECONFIG", env("kubeconfig")],
                help="kubeconfig file (default: the in-cluster service account)",
            ),
            click.option(
                "--addr",
                default=default_addr,
                envvar=env("addr"),
                show_default=True,
                help="HTTP address for /metrics, /healthz and /readyz",
            ),
            click.option(
                "-v", "--v", "verbosity", type=int, default=0, envvar=env("v"), help="log verbosity"
            ),
            click.option(
                "--log-format",
                type=click.Choice(["text", "json"]),
                default="text",
                envvar=env("log_format"),
                show_default=True,
            ),
        ]
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


def election_options(env_prefix: str, identity_flag: str) -> Callable[[F], F]:
    """What every leader-electing process adds: this replica's name in the Lease (Koordinator's manager and
    descheduler spell that flag differently, hence ``identity_flag``; ``POD_NAME`` in a Deployment) and
    ``--request-timeout``, which must stay below lease duration minus renew deadline so a hung request
    cannot outlive the leadership it was made under."""

    def env(name: str) -> str:
        return env_var(env_prefix, name)

    def decorate(fn: F) -> F:
        fn = click.option(
            "--request-timeout",
            default="3s",
            envvar=env("request-timeout"),
            show_default=True,
            help="timeout of each API request (below lease duration minus renew deadline)",
        )(fn)
        return click.option(
            identity_flag,
            default="",
            envvar=[env(identity_flag.lstrip("-")), "POD_NAME"],
            help="this replica's name in the Lease (default: <hostname>_<random>)",
        )(fn)

    return decorate


def serve(
    name: str,
    components: Sequence[Component],
    addr: Address,
    registry: CollectorRegistry,
    stop: threading.Event,
    *,
    sync_timeout: float = 60.0,
    routes: Mapping[str, Route] | None = None,
) -> int:
    """Run ``components`` under one supervisor with HTTP on ``addr`` (plus ``routes``) until ``stop``;
    the exit code."""
    http = ProcessHTTPServer(addr.host, addr.port, registry)
    for path, route in (routes or {}).items():
        http.route(path, route)
    daemon = Daemon(list(components), Supervisor(stop), http, sync_timeout=sync_timeout)
    return daemon.run(stop)


def main_guard(run: Callable[[threading.Event], int]) -> None:
    """Install the signal handlers, run, and exit with the code; configuration errors exit 2."""
    stop = threading.Event()
    with install_signals(stop):
        try:
            code = run(stop)
        except ConfigError as err:
            click.echo(f"Error: {err}", err=True)
            sys.exit(2)
    sys.exit(code)
