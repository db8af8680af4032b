"""``koordlet top`` against a stand-in agent on loopback (an HTTP server serving a real ``/status``
document): ``--once``, the live view on a terminal and off one, losing the agent, no agent, the bearer
token, an https agent verified with ``--ca-file``; and the renderer's lines."""

from __future__ import annotations

import io
import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from koordlet import api
from koordlet.agentstatus import StatusSources, build_status
from koordlet.cli import build_cli
from koordlet.testing import FakeClock, FakeHostReader, FakeMetrics, FakeStates, make_node, make_pod
from koordlet.testing.kubelet import make_cert
from koordlet.top import command
from koordlet.top.client import StatusClient, base_url
from koordlet.top.render import be_lines, render
from tests.support.terminal import sigint_reaches_children


def status_doc(pods: int = 3) -> dict[str, Any]:
    clock = FakeClock()
    metrics = FakeMetrics(clock)
    made = [make_pod(f"pod-{i}", api.QOSClass.BE if i % 2 else api.QOSClass.LS) for i in range(pods)]
    for i, p in enumerate(made):
        metrics.set(api.POD_CPU_USAGE, 0.1 * (i + 1), {"pod_uid": p.uid})
    metrics.set(api.NODE_CPU_USAGE, 1.0)
    host = FakeHostReader()
    host.add_cgroup("kubepods/besteffort", cpuset_cpus="0-1", cpu_cfs_quota_us="50000")
    suppress: dict[str, api.JSONValue] = {
        "active": True,
        "policy": "cfsQuota",
        "path": "periodic",
        "decidedAt": 1.0,
        "capacityMilli": 2000,
        "thresholdPercent": 65,
        "minPercent": None,
        "lsPodsMilli": 400,
        "lsHostAppsMilli": 0,
        "systemMilli": 300,
        "nonBEMilli": 700,
        "budgetMilli": 600,
        "noiseBandMilli": 150,
        "fastSamplesWanted": True,
    }
    src = StatusSources(
        "node-1",
        FakeStates(make_node(2000, 2**30), made),
        metrics,
        host,
        list,
        lambda: [{"name": "BECPUSuppress", "source": "builtin", "state": "running", "status": suppress}],
        lambda: 100.0,
        40.0,
    )
    return build_status(src)


class Agentish:
    """Serves ``doc`` at ``/status`` (401 without ``token`` when one is set) until stopped."""

    def __init__(self, doc: dict[str, Any], token: str = "", tls_dir: Path | None = None) -> None:
        self.doc, self.token = doc, token
        self.seen_auth: list[str] = []
        me = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                me.seen_auth.append(self.headers.get("Authorization", ""))
                if me.token and self.headers.get("Authorization") != f"Bearer {me.token}":
                    code, body = 401, b"Unauthorized"
                elif self.path.startswith("/status"):
                    code, body = 200, json.dumps(me.doc).encode()
                else:
                    code, body = 404, b"not found"
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.scheme = "http"
        if tls_dir is not None:
            cert, key = make_cert(tls_dir)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.cert, self.scheme = cert, "https"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    @property
    def addr(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(5)


@pytest.fixture
def agentish() -> Iterator[Agentish]:
    a = Agentish(status_doc())
    yield a
    a.stop()


def run_top(*args: str) -> Any:
    return CliRunner().invoke(build_cli([]), ["top", *args])


def test_once_prints_pods_by_usage_with_qos_and_the_budget_formula(agentish: Agentish) -> None:
    out = run_top("--once", "--addr", agentish.addr)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    pods = [line.split() for line in lines if line.startswith("default/pod-")]
    assert [(p[0], p[1], p[4]) for p in pods] == [
        ("default/pod-2", "LS", "0.300"),
        ("default/pod-1", "BE", "0.200"),
        ("default/pod-0", "LS", "0.100"),
    ]
    budget = next(line for line in lines if line.startswith("BE   budget"))
    assert "0.60 cores = 2.00 x 65% - non-BE 0.70" in budget and "system 0.30" in budget
    assert "allowed 0.50 cores (cpuset 0-1, quota 50000/100000us)" in out.output
    assert "fast path: sampling, noise band 0.15 cores" in out.output
    assert "PLUGINS  BECPUSuppress running" in out.output


def test_no_agent_exits_non_zero_saying_where_it_looked() -> None:
    with socket.socket() as held:  # bound, never listening: refused, and no one else can take the port
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        out = run_top("--once", "--addr", f":{port}")
    assert out.exit_code == 1
    assert f"no agent answered at http://127.0.0.1:{port}/status" in out.output
    assert "--addr" in out.output
    assert run_top("--once", "--addr", "nonsense").exit_code == 2


def test_token_is_sent_and_a_refusal_says_what_to_pass(tmp_path: Path) -> None:
    a = Agentish(status_doc(), token="s3cret")
    try:
        refused = run_top("--once", "--addr", a.addr)
        assert refused.exit_code == 1 and "401" in refused.output and "--token" in refused.output
        (tmp_path / "token").write_text("s3cret\n")
        ok = run_top("--once", "--addr", a.addr, "--token-file", str(tmp_path / "token"))
        assert ok.exit_code == 0, ok.output
        assert a.seen_auth[-1] == "Bearer s3cret"
    finally:
        a.stop()


@pytest.mark.tool("openssl")
def test_https_agent_is_verified_with_the_ca_file(tmp_path: Path) -> None:
    a = Agentish(status_doc(), tls_dir=tmp_path)
    try:
        unverified = run_top("--once", "--addr", a.addr)
        assert unverified.exit_code == 1 and "--ca-file" in unverified.output
        ok = run_top("--once", "--addr", a.addr, "--ca-file", str(a.cert))
        assert ok.exit_code == 0 and "default/pod-0" in ok.output, ok.output
    finally:
        a.stop()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_view_redraws_in_place_and_restores_the_screen_when_the_agent_goes(agentish: Agentish) -> None:
    out = Terminal()
    client = StatusClient(base_url(agentish.addr), timeout=1.0)
    threading.Timer(0.7, agentish.stop).start()
    code = command.live(client, 5.0, 0.2, out)
    assert code == 1
    text = out.getvalue()
    assert text.startswith(command.ENTER) and text.endswith(command.LEAVE)
    frames = text[len(command.ENTER) : -len(command.LEAVE)].split(command.HOME)[1:]
    assert len(frames) >= 2  # redrawn, each frame from the home position
    for f in frames:
        assert "\x1b[2J" not in f  # never erased before drawing: no flicker
        assert f.endswith(command.EOL + command.EOS)
        assert all(line.endswith(command.EOL) for line in f.split("\n")[:-1])
    assert "default/pod-2" in frames[-1]


def test_live_view_off_a_terminal_prints_frames_and_names_the_lost_agent(agentish: Agentish) -> None:
    threading.Timer(0.7, agentish.stop).start()
    out = run_top("--addr", agentish.addr, "--interval", "0.2")
    assert out.exit_code == 1
    assert "\x1b[" not in out.output
    assert out.output.count("koordlet top · node node-1") >= 2
    assert f"lost the agent: no agent answered at {agentish.addr}/status" in out.output


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_live_view_exits_zero_on_ctrl_c_and_sigterm(agentish: Agentish, sig: int) -> None:
    with sigint_reaches_children():
        proc = subprocess.Popen(
            [sys.executable, "-m", "koordlet", "top", "--addr", agentish.addr, "--interval", "0.2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("koordlet top · node node-1")
        proc.send_signal(sig)
        _out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_render_fits_the_terminal() -> None:
    doc = status_doc(pods=40)
    lines = render(doc, where="x", width=60, height=20)
    assert len(lines) <= 20 and all(len(line) <= 60 for line in lines)
    assert any(line.startswith("... ") and "more pods" in line for line in lines)
    assert len([ln for ln in render(doc, where="x") if ln.startswith("default/pod-")]) == 40
    missing = render({"apiVersion": "koordlet/v1"}, where="x")  # nothing sampled yet: dashes, no error
    assert any("suppression: no decision" in ln for ln in missing)


def test_the_fast_path_line_says_whether_it_samples() -> None:
    sup: dict[str, Any] = {"active": True, "fastSamplesWanted": False, "noiseBandMilli": 90}
    assert be_lines({"beCPU": {"suppress": sup}})[-1].strip() == (
        "fast path: asleep (BE idle or the node out of reach of the threshold)"
    )
    sup.update(fastSamplesWanted=True, noiseBandMilli=None)
    assert be_lines({"beCPU": {"suppress": sup}})[-1].strip() == "fast path: sampling, noise not learnt yet"
    del sup["fastSamplesWanted"]  # an older agent: no line
    assert len(be_lines({"beCPU": {"suppress": sup}})) == 2
