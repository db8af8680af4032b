"""The ``koordlet top`` command: the live view, or one plain snapshot with ``--once``.

Redraw: each frame is written in one ``write`` as cursor-home, every line followed by clear-to-end-of-line,
then clear-to-end-of-screen, on the terminal's alternate screen. Nothing is erased before it is
overwritten, so there is no blank moment to flicker; lines are cut to the terminal's width so none wraps
and moves the rest. curses would do the same with a dependency on terminfo and a second code path for
``--once``; the view is a list of lines, which these three escape sequences draw. Not on a terminal,
frames are printed one after the other (like ``top -b``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import shutil
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import IO, Any

import click

from koordlet.top.client import DEFAULT_ADDR, AgentUnreachable, StatusClient, base_url
from koordlet.top.render import render

ENTER, LEAVE = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"
HOME, EOL, EOS = "\x1b[H", "\x1b[K", "\x1b[J"
FAILURES_TOLERATED = 3


def frame(lines: list[str]) -> str:
    """One full-screen redraw of ``lines`` (see the module doc)."""
    return HOME + "".join(line + EOL + "\n" for line in lines[:-1]) + (lines[-1] if lines else "") + EOL + EOS


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def live(client: StatusClient, window: float, interval: float, out: IO[str]) -> int:
    """Redraw every ``interval`` seconds until Ctrl-C/SIGTERM (0) or the agent is lost (1)."""
    tty = out.isatty()
    wait = threading.Event()
    prev: dict[str, Any] | None = None
    failures = 0
    lost = ""
    old_term = (
        signal.signal(signal.SIGTERM, _interrupt)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    if tty:
        out.write(ENTER)
    try:
        while True:
            try:
                doc = client.get(window)
            except AgentUnreachable as err:
                failures += 1
                if prev is None or err.gone or failures >= FAILURES_TOLERATED:
                    lost = str(err) if prev is None else f"lost the agent: {err}"
                    break
            else:
                failures = 0
                size = shutil.get_terminal_size()
                lines = render(
                    doc,
                    where=client.base,
                    width=size.columns if tty else None,
                    height=size.lines if tty else None,
                    prev=prev,
                )
                out.write(frame(lines) if tty else "\n".join(lines) + "\n\n")
                out.flush()
                prev = doc
            wait.wait(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if tty:
            out.write(LEAVE)
            out.flush()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    if lost:
        click.echo(f"koordlet top: {lost}", err=True)
        return 1
    return 0


def _token(token: str, token_file: str) -> str:
    if token and token_file:
        raise click.UsageError("give --token or --token-file, not both")
    if token_file:
        try:
            return Path(token_file).read_text().strip()
        except OSError as err:
            raise click.BadParameter(
                f"cannot read {token_file}: {err.strerror}", param_hint="--token-file"
            ) from err
    return token


@click.command("top", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option(
    "--addr",
    default=DEFAULT_ADDR,
    envvar="KOORDLET_TOP_ADDR",
    show_default=True,
    help="the agent: host:port, :port or a URL (https://... for an agent serving TLS)",
)
@click.option("--once", is_flag=True, help="print one plain-text snapshot and exit (for scripts)")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="seconds between redraws",
)
@click.option(
    "--window",
    type=click.FloatRange(min=0.1, max=600),
    default=5.0,
    show_default=True,
    help="seconds the usage figures average over",
)
@click.option("--token", default="", envvar="KOORDLET_TOP_TOKEN", help="bearer token for the agent")
@click.option("--token-file", default="", type=click.Path(dir_okay=False), help="file holding the token")
@click.option(
    "--ca-file",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="PEM CA bundle to verify an https agent",
)
@click.option("--insecure-skip-tls-verify", is_flag=True, help="do not verify the agent's certificate")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=3.0,
    show_default=True,
    help="seconds to wait for each answer",
)
def top(
    addr: str,
    once: bool,
    interval: float,
    window: float,
    token: str,
    token_file: str,
    ca_file: str | None,
    insecure_skip_tls_verify: bool,
    timeout: float,
) -> None:
    """A live view of a running agent: node usage, the BE budget and how it was computed, the BE cpuset
    and quota, pods by usage with QoS and priority, recent evictions, plugin states."""
    try:
        base = base_url(addr)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--addr") from err
    client = StatusClient(
        base, _token(token, token_file), ca_file or "", insecure=insecure_skip_tls_verify, timeout=timeout
    )
    if once:
        try:
            doc = client.get(window)
        except AgentUnreachable as err:
            click.echo(f"koordlet top: {err}", err=True)
            sys.exit(1)
        click.echo("\n".join(render(doc, where=base)))
        return
    sys.exit(live(client, window, interval, sys.stdout))
