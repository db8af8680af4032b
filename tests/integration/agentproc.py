"""Helpers to run the real ``koordlet run`` process in tests (ports, standalone arguments, HTTP polling)."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


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


def wait_http(url: str, timeout: float, want: int = 200) -> float | None:
    """Seconds until ``url`` answered ``want``, or None on timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if http_get(url, timeout=0.5)[0] == want:
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.05)
    return None


def get_json(url: str) -> Any:
    status, body = http_get(url)
    assert status == 200, body[:500]
    return json.loads(body)


class Agent:
    """A ``koordlet run`` child process; stopped with SIGTERM (and checked to exit 0) by :meth:`stop`."""

    def __init__(
        self, tmp: Path, *extra: str, env: dict[str, str] | None = None, kubeconfig: Path | None = None
    ) -> None:
        """Standalone, or in cluster mode against ``kubeconfig`` when given."""
        import os
        import subprocess
        import sys

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"agent-{self.port}.log"
        self._log = self.log.open("w")
        full_env = {**os.environ, "NODE_NAME": "e2e-node", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "koordlet", "run", *self._args(tmp, kubeconfig, extra)],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def _args(self, tmp: Path, kubeconfig: Path | None, extra: tuple[str, ...]) -> list[str]:
        args = standalone_args(tmp, self.port, *extra)
        if kubeconfig is None:
            return args
        return [a for a in args if a != "--standalone"] + [f"--kubeconfig={kubeconfig}"]

    def wait_ready(self, timeout: float = 60.0) -> None:
        if wait_http(self.base + "/readyz", timeout) is None:
            raise AssertionError(f"agent not ready in {timeout}s:\n{self.tail()}")

    def get(self, path: str) -> Any:
        return get_json(self.base + path)

    def tail(self, n: int = 4000) -> str:
        self._log.flush()
        return self.log.read_text()[-n:]

    def stop(self, timeout: float = 10.0) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except Exception:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return int(self.proc.returncode)
