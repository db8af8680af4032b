"""Koordinator's koordlet DaemonSet arguments start the real agent: the chart's exact
list (v1.8.0 ``templates/koordlet.yaml``, with the metrics port and the host cgroup mount of this machine)
plus our path flags, no subcommand; one warning per flag or gate without an implementation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import qosplugins
from koordlet.featuregates import koordlet_gates, unimplemented_enabled
from koordlet.testing.agent import standalone_args, wait_http
from koordshared.testing.ports import EPHEMERAL, port_from_log


def test_the_charts_argument_list_starts_the_agent(tmp_path: Path) -> None:
    chart = [
        f"-addr={EPHEMERAL}",  # the chart's -addr=:9316, on loopback (any free port) for a test
        "-cgroup-root-dir=/sys/fs/cgroup/",  # the chart's /host-cgroup/ is this mount
        "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true",
        "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]
    ours = [a for a in standalone_args(tmp_path, 0) if not a.startswith("--addr")]
    log = tmp_path / "agent.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "koordlet", *chart, *ours],
            env={**os.environ, "NODE_NAME": "chart-node"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            port = port_from_log(log, proc)
            ready = wait_http(f"http://127.0.0.1:{port}/readyz", 60)
            assert ready, log.read_text()[-3000:]
        finally:
            proc.terminate()
            code = proc.wait(20)
    text = log.read_text()
    assert code == 0, text[-3000:]
    warnings = [line for line in text.splitlines() if line.startswith("W") and "koordlet.cli]" in line]
    assert sum("runtime-hooks-host-endpoint" in w for w in warnings) == 1, warnings
    assert not any("logtostderr" in w for w in warnings)
    gates = sorted(w.split("feature gate ")[1].split()[0] for w in warnings if "feature gate " in w)
    # One warning for each gate that is on and that nothing here implements (the chart turns Accelerators
    # on; the runtime hooks' gates, on by default, are the agent's own now).
    table = koordlet_gates({p.name: p.feature for p in qosplugins.BUILTIN})
    table.set_from_string(chart[2].split("=", 1)[1])
    expected = unimplemented_enabled(table, [p.name for p in qosplugins.BUILTIN])
    assert "Accelerators" in expected and "BatchResource" not in expected
    assert gates == expected
