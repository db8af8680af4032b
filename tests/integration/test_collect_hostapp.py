"""A host application found by process name through psutil on the real /proc: a busy process started under
a unique name is measured within 10 % of its own CPU time, and its RSS is reported."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.metricsadvisor import framework as fw
from koordlet.metricsadvisor.hostapp import HostAppConfig, HostApplicationCollector, PsutilProcesses
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import FakeStates
from koordlet.testing.cgroups import BUSY
from tests.support.procstat import cpu_seconds
from tests.support.recording import RecordingErrors


def test_process_found_by_name_is_measured(tmp_path: Path) -> None:
    # comm is the basename of the path given to exec, so a symlink names the process
    name = f"kha{uuid.uuid4().hex[:8]}"
    link = tmp_path / name
    link.symlink_to(sys.executable)
    proc = subprocess.Popen([str(link), "-c", BUSY, "0.4"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"  # in its loop
        paths = HostPaths(cgroup_root=tmp_path / "no-cgroups")
        host = Host(paths, CgroupMode.V1, CgroupDriver.CGROUPFS)
        app = api.HostApplication(name=name, qos=api.QOSClass.LS)
        cache = MetricCache()
        errors = RecordingErrors()
        col = HostApplicationCollector(
            HostAppConfig(1.0),
            fw.Options(
                cache=cache,
                clock=time.monotonic,
                errors=errors,
                host=host,
                states=FakeStates(slo=api.NodeSLO(host_applications=(app,))),
                shared=fw.SharedState(),
            ),
            processes=PsutilProcesses(),
        )

        def own_cpu() -> float:
            return cpu_seconds(proc.pid)

        c0 = own_cpu()
        col.collect()
        t0 = time.monotonic()
        time.sleep(2.0)
        c1 = own_cpu()
        col.collect()
        dt = time.monotonic() - t0
        cpu = {lbl["host_app_name"]: v for lbl, _t, v in cache.latest(api.HOST_APP_CPU_USAGE)}
        mem = {lbl["host_app_name"]: v for lbl, _t, v in cache.latest(api.HOST_APP_MEMORY_USAGE)}
        true_cores = (c1 - c0) / dt
        assert true_cores > 0.05
        assert cpu[name] == pytest.approx(true_cores, rel=0.10)
        assert mem[name] > 1024 * 1024
        assert not errors.counts
        col.close()
    finally:
        proc.kill()
        proc.wait(5)
    assert proc.returncode is not None
