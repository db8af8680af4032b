"""The real agent as a child process, for end-to-end tests of a plugin or the agent (and benchmarks).

:class:`Agent` runs ``python -m koordlet run --standalone`` with its state under a temporary directory and
its HTTP server on a free loopback port; :meth:`Agent.stop` sends SIGTERM and returns the exit status.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from koordlet.testing.wait import Waited, wait_until
from koordshared.testing.dist import install_distribution
from koordshared.testing.ports import port_from_log

__all__ = ["Agent", "install_distribution", "koordlet_command"]


def koordlet_command(
    *args: str, site: Path | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``koordlet <args>`` in a child process (with the plugins installed in ``site``); the caller checks
    the exit status and output."""
    env = {**os.environ, "NODE_NAME": "node-under-test"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "koordlet", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def standalone_args(tmp: Path, port: int, *extra: str) -> list[str]:
    """Arguments for a standalone agent whose state lives under ``tmp`` and whose HTTP is on ``port``."""
    (tmp / "run").mkdir(parents=True, exist_ok=True)
    return [
        "--standalone",
        f"--addr=127.0.0.1:{port}",
        f"--tsdb-path={tmp / 'metric-data'}",
        f"--var-run-root-dir={tmp / 'run'}",
        *extra,
    ]


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def wait_http(url: str, timeout: float, want: int = 200) -> Waited:
    """Wait until ``url`` answers ``want``."""

    def answered() -> bool:
        try:
            return http_get(url, timeout=0.5)[0] == want
        except OSError:
            return False

    return wait_until(answered, timeout, step=0.05)


def get_json(url: str) -> Any:
    status, body = http_get(url)
    assert status == 200, body[:500]
    return json.loads(body)


class Agent:
    """A ``koordlet run`` child process; stopped with SIGTERM (and checked to exit 0) by :meth:`stop`."""

    def __init__(
        self, tmp: Path, *extra: str, env: dict[str, str] | None = None, kubeconfig: Path | None = None
    ) -> None:
        """Standalone, or in cluster mode against ``kubeconfig`` when given. The agent binds a free port of
        its own choosing (no race with other processes) and :attr:`port` reads it from the agent's log."""
        self.log = Path(tempfile.mkstemp(prefix="agent-", suffix=".log", dir=tmp)[1])
        self._log = self.log.open("w")
        self._port: int | None = None
        full_env = {**os.environ, "NODE_NAME": "e2e-node", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "koordlet", "run", *self._args(tmp, kubeconfig, extra)],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def port(self) -> int:
        """The agent's HTTP port, once it serves (waits for it)."""
        if self._port is None:
            self._port = port_from_log(self.log, self.proc)
        return self._port

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _args(self, tmp: Path, kubeconfig: Path | None, extra: tuple[str, ...]) -> list[str]:
        args = standalone_args(tmp, 0, *extra)
        if kubeconfig is None:
            return args
        return [a for a in args if a != "--standalone"] + [f"--kubeconfig={kubeconfig}"]

    def wait_ready(self, timeout: float = 60.0) -> None:
        try:
            if self._port is None:  # the start counts in ``timeout`` (slow under PYTHONTRACEMALLOC)
                self._port = port_from_log(self.log, self.proc, timeout=timeout)
            base = self.base
        except (RuntimeError, TimeoutError) as err:
            raise AssertionError(f"agent not serving:\n{err}") from err
        if not wait_http(base + "/readyz", timeout):
            raise AssertionError(f"agent not ready in {timeout}s:\n{self.tail()}")

    def get(self, path: str) -> Any:
        return get_json(self.base + path)

    def tail(self, n: int = 4000) -> str:
        self._log.flush()
        return self.log.read_text()[-n:]

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except Exception:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return int(self.proc.returncode)
