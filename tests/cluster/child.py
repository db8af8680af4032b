"""A cluster process run as a real child (``python -m <module>``) for a test: its output in a log file,
the port it chose read from that log (no race with other processes for a free port), SIGTERM to stop and
the exit code back. Each process's harness (koord-manager, koord-scheduler, the extender, the
descheduler) builds its command line and adds what its tests read. Independent of pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from koordshared.testing.ports import port_from_log


class ChildProcess:
    """``python -m module *argv`` with stdout and stderr in ``log_path``; ``env`` is added to this
    process's environment."""

    def __init__(
        self,
        name: str,
        module: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._port: int | None = None
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *argv],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    @property
    def port(self) -> int:
        """The port the child chose and logged (waits for it)."""
        if self._port is None:
            self._port = port_from_log(self.log_path, self.proc)
        return self._port

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, str]:
        """A GET of the child's HTTP endpoint: status and body (an error status is returned, not raised)."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=5) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def tail(self, chars: int = 3000) -> str:
        return self.log()[-chars:]

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would end it."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0, *, signal_it: bool = True) -> int:
        """SIGTERM (unless ``signal_it`` is false: it was signalled, or stops by itself) and the exit
        code; a child that does not stop in ``timeout`` is killed and fails the test with its log."""
        if signal_it and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"{self.name} did not stop in {timeout}s:\n{self.tail()}") from None
        finally:
            self._log.close()
        return int(code)
