"""The DaemonSet's capability set, tried on the real kernel: a uid-0 process holding only the capabilities
the manifest adds writes pod cgroup files, reads another user's /proc entries and kills that user's
process; without CAP_KILL the kill is refused, so the capability the manifest adds is the one needed.

Runs under ``setpriv`` with the bounding set cut to the manifest's list (as the container runtime does),
against cgroups created under a unique ``koordlet-test-<hex>`` parent that is removed afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordlet.system.paths import HostPaths
from koordlet.testing.cgroups import RealCgroupTree
from tests.support.paths import ROOT

DAEMONSET = ROOT / "deploy" / "daemonset" / "koordlet.yaml"
NOBODY = 65534
# What the agent does to a pod, written as it does it (os.open/os.write), with the results reported back.
AGENT_ACTIONS = r"""
import json, os, signal, sys
cpu_dir, mem_dir, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
proc_root = sys.argv[4]
out = {}
def write(path, value):
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, value.encode()) == len(value)
    finally:
        os.close(fd)
def attempt(name, fn):
    try:
        out[name] = fn()
    except OSError as err:
        out[name] = f"errno {err.errno}"
attempt("quota", lambda: write(os.path.join(cpu_dir, "cpu.cfs_quota_us"), "50000"))
attempt("memlimit", lambda: write(os.path.join(mem_dir, "memory.limit_in_bytes"), str(256 << 20)))
attempt("procs", lambda: open(os.path.join(cpu_dir, "cgroup.procs")).read().split())
attempt("stat", lambda: open(os.path.join(proc_root, str(pid), "stat")).read().split()[2])
attempt("statm", lambda: len(open(os.path.join(proc_root, str(pid), "statm")).read().split()))
with open("/proc/self/status") as f:
    out["capeff"] = [l.split()[1] for l in f if l.startswith("CapEff")][0]
attempt("kill", lambda: os.kill(pid, signal.SIGKILL) is None)
print(json.dumps(out))
"""


def manifest_caps() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(DAEMONSET.read_text()) if d and d["kind"] == "DaemonSet"]
    (container,) = docs[0]["spec"]["template"]["spec"]["containers"]
    sc: dict[str, Any] = container["securityContext"]
    return sc


def setpriv_caps(names: list[str]) -> str:
    return ",".join(["-all", *(f"+{n.lower()}" for n in names)])


@pytest.fixture
def pod_cgroups() -> Iterator[tuple[Path, Path]]:
    """A pod-like cgroup in the cpu and memory controllers under a unique test parent."""
    root = HostPaths().cgroup_root
    if not all((root / ctrl / "cgroup.procs").exists() for ctrl in ("cpu", "memory")):
        pytest.skip("needs the cgroup v1 cpu and memory controllers")
    with RealCgroupTree(("cpu", "memory"), root=root) as tree:
        tree.mkdir("pod")
        yield tree.path("cpu", "pod"), tree.path("memory", "pod")


def start_victim(cpu_dir: Path, mem_dir: Path) -> subprocess.Popen[bytes]:
    """A process of another user (a pod running as nobody), placed in the pod's cgroups."""
    victim = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sleep", "60"]
    )
    for d in (cpu_dir, mem_dir):
        fd = os.open(d / "cgroup.procs", os.O_WRONLY)
        try:
            assert os.write(fd, str(victim.pid).encode()) > 0
        finally:
            os.close(fd)
    return victim


def run_as_agent(caps: list[str], cpu_dir: Path, mem_dir: Path, pid: int) -> dict[str, Any]:
    spec = setpriv_caps(caps)
    cmd = [
        "setpriv",
        f"--inh-caps={spec}",
        f"--ambient-caps={spec}",
        f"--bounding-set={spec}",
        "--no-new-privs",
        sys.executable,
        "-c",
        AGENT_ACTIONS,
        str(cpu_dir),
        str(mem_dir),
        str(pid),
        str(HostPaths().proc_root),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_manifest_is_unprivileged_with_all_capabilities_dropped() -> None:
    sc = manifest_caps()
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc["runAsUser"] == 0


@pytest.mark.root
@pytest.mark.tool("setpriv")
def test_the_manifests_capabilities_suffice_for_cgroup_writes_reads_and_kills(
    pod_cgroups: tuple[Path, Path],
) -> None:
    cpu_dir, mem_dir = pod_cgroups
    caps = list(manifest_caps()["capabilities"].get("add", []))
    victim = start_victim(cpu_dir, mem_dir)
    try:
        out = run_as_agent(caps, cpu_dir, mem_dir, victim.pid)
        assert out["quota"] is True and out["memlimit"] is True, out
        assert (cpu_dir / "cpu.cfs_quota_us").read_text().strip() == "50000"
        assert int((mem_dir / "memory.limit_in_bytes").read_text()) == 256 << 20
        assert str(victim.pid) in out["procs"] and out["stat"] in ("S", "R") and out["statm"] == 7, out
        assert out["kill"] is True, out
        assert victim.wait(timeout=10) == -signal.SIGKILL
        assert int(out["capeff"], 16).bit_count() == len(caps)  # nothing beyond the manifest's list
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


@pytest.mark.root
@pytest.mark.tool("setpriv")
def test_without_cap_kill_the_eviction_by_kill_is_refused(pod_cgroups: tuple[Path, Path]) -> None:
    cpu_dir, mem_dir = pod_cgroups
    caps = [c for c in manifest_caps()["capabilities"].get("add", []) if c != "KILL"]
    victim = start_victim(cpu_dir, mem_dir)
    try:
        out = run_as_agent(caps, cpu_dir, mem_dir, victim.pid)
        assert out["quota"] is True, out  # cgroup writes need no capability at all
        assert out["kill"] == "errno 1", out  # EPERM: CAP_KILL is the one the manifest must add
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
