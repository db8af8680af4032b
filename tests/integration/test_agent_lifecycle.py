"""The real agent process: /healthz within 3 s, /readyz once started, /metrics (gzip when asked), SIGTERM →
exit 0 within 5 s, a second signal forces exit, a port already in use is a clear non-zero exit."""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from koordlet.testing.agent import http_get, standalone_args, wait_http
from koordshared.testing.ports import port_from_log


def start(tmp: Path, port: int, *extra: str, stderr: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    env = {**os.environ, "NODE_NAME": "lifecycle-node"}
    return subprocess.Popen(
        [sys.executable, "-m", "koordlet", "run", *standalone_args(tmp, port, *extra)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
    )


def test_healthz_fast_ready_and_graceful_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    out = log.open("w")
    proc = start(tmp_path, 0, stderr=out)  # any free port, read back from the log: no race
    try:
        port = port_from_log(log, proc, timeout=3.0)
        assert wait_http(f"http://127.0.0.1:{port}/healthz", timeout=3.0), "healthz did not answer within 3 s"
        assert wait_http(f"http://127.0.0.1:{port}/readyz", timeout=30.0)
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and b"koordlet_start_time" in body and b"koordlet_build_info" in body
        assert b"koordlet_plugin_state" in body
        # /metrics is the pre-rendered payload, gzip-compressed for a client that asks (as Prometheus does)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            assert b"koordlet_build_info" in gzip.decompress(resp.read())
    finally:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        out.close()
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert time.monotonic() - t0 < 5.0


def test_port_in_use_exits_non_zero_with_a_clear_message(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = start(tmp_path, port)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert f"127.0.0.1:{port}" in err and "cannot listen" in err
