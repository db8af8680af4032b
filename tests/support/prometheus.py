"""A real Prometheus (the Debian package) on loopback for tests: a temp config and data dir, scraping the
given targets every second, killed by its pid and its directory removed at the end; and its HTTP API."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from koordlet.testing import wait_until
from koordlet.testing.agent import free_port, http_get

Target = tuple[str, Mapping[str, str]]
"""``(host:port, extra target labels)``."""


@contextlib.contextmanager
def prometheus(jobs: Mapping[str, Sequence[Target]], *, interval: str = "1s") -> Iterator[str]:
    """A Prometheus scraping each job's targets every ``interval``; yields its base URL once it is ready."""
    data = Path(tempfile.mkdtemp(prefix="koordlet-prom-"))
    port = free_port()
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [addr], "labels": dict(labels)} for addr, labels in targets],
            }
            for job, targets in jobs.items()
        ],
    }
    (data / "prometheus.yml").write_text(yaml.safe_dump(config))
    # Prometheus cannot report a port it chose itself, so it is given a free one; if another process takes
    # that port between the check and Prometheus' bind, Prometheus exits at once and is started again.
    for _attempt in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={data / 'prometheus.yml'}",
                f"--storage.tsdb.path={data / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"

        def settled(proc: subprocess.Popen[bytes] = proc, base: str = base) -> bool:
            if proc.poll() is not None:
                return True
            try:
                return http_get(base + "/-/ready", timeout=0.5)[0] == 200
            except OSError:
                return False

        if wait_until(settled, 30) and proc.poll() is None:
            break
        proc.kill()
        proc.wait(10)
    else:
        shutil.rmtree(data, ignore_errors=True)
        raise AssertionError("Prometheus did not become ready in 5 attempts")
    try:
        yield base
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)


def api_get(base: str, path: str, **params: str | Sequence[str]) -> dict[str, Any]:
    """``GET /api/v1/<path>``; the decoded answer, errors (400/422 for a bad query) included."""
    url = f"{base}/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as err:
        return dict(json.loads(err.read() or b"{}") or {"status": "error", "error": f"HTTP {err.code}"})
