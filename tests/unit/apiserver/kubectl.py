"""Running the real kubectl against a test API server, as an operator would from a shell.

Each call gets the kubeconfig, its own discovery cache and HOME (nothing is read from or written to the
user's ``~/.kube``), runs from the repository root (the README's relative paths work) and returns the
completed process. :func:`ran_version` says which kubectl binary answered: the one on PATH may be a
dispatcher that picks a binary by the server's version (Google Cloud SDK's does), so the truth is the
``User-Agent`` the server saw.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

from tests.apiserver import APIServer
from tests.support.paths import ROOT

_AGENT = re.compile(r"kubectl/(v\d+\.\d+\.\d+\S*)")


@dataclasses.dataclass(frozen=True)
class Kubectl:
    """kubectl with a fixed kubeconfig and a private cache/HOME under ``home``."""

    kubeconfig: Path
    home: Path

    def __call__(
        self, *args: str, token: str | None = None, stdin: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        binary = shutil.which("kubectl")
        assert binary is not None
        argv = [binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.home / 'cache'}", *args]
        if token is not None:
            argv.append(f"--token={token}")
        return subprocess.run(
            argv,
            check=False,
            cwd=ROOT,
            env={
                "HOME": str(self.home),
                "PATH": "/usr/bin:/bin:/usr/local/bin",
                "KUBECONFIG": str(self.kubeconfig),
            },
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *args: str, token: str | None = None, stdin: str | None = None) -> str:
        """stdout of a call that must succeed (the failure shows kubectl's stderr)."""
        done = self(*args, token=token, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr}"
        return done.stdout


def ran_version(server: APIServer) -> str:
    """The version of the kubectl binary that has talked to ``server`` (from its User-Agent)."""
    for request in server.requests:
        found = _AGENT.search(request.headers.get("User-Agent", ""))
        if found:
            return found.group(1)
    return ""


def minor(version: str) -> int:
    found = re.match(r"v1\.(\d+)", version)
    return int(found.group(1)) if found else 0


def table(output: str) -> list[dict[str, str]]:
    """Rows of kubectl's human-readable table, by column (columns are split on runs of 2+ spaces)."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?:(?<=\s\s)|^)\S", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    rows = []
    for line in lines[1:]:
        cells = [
            line[s:e].strip() if e is not None else line[s:].strip()
            for s, e in zip(starts, [*starts[1:], None], strict=True)
        ]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows
