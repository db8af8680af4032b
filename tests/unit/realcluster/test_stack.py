"""deploy/'s workloads as the host processes of the real cluster: the container's command and arguments,
``$(VAR)``s expanded, each volume's mount path replaced by what the kubelet would mount there."""

from __future__ import annotations

from pathlib import Path

from tests.realcluster import stack


def _runs(tmp_path: Path) -> dict[str, stack.HostRun]:
    host = {"/var/run/": tmp_path / "var-run"}
    return {r.name: r for r in stack.runs(tmp_path, "node-a", host)}


def test_the_agent_runs_with_the_daemonsets_host_paths(tmp_path: Path) -> None:
    agent = _runs(tmp_path)["koordlet"]
    argv = list(agent.argv)
    assert Path(argv[0]).name == "koordlet" and argv[1] == "run"  # the image's entrypoint
    assert "--cgroup-root-dir=/sys/fs/cgroup/" in argv  # hostPath /sys/fs/cgroup/ mounted at /host-cgroup/
    assert "--sys-root-dir=/sys/" in argv and "--sys-fs-root-dir=/sys/fs/" in argv
    assert f"--var-run-root-dir={tmp_path / 'var-run'}/" in argv  # redirected: the test keeps /var/run
    assert "--var-lib-kubelet-dir=/var/lib/kubelet/" in argv
    assert "--addr=127.0.0.1:0" in argv  # $(POD_IP) expanded, the port any free one
    tsdb = next(a for a in argv if a.startswith("--tsdb-path="))
    assert tsdb == f"--tsdb-path={tmp_path / 'koordlet' / 'volumes' / 'metric-data'}/"  # its emptyDir
    assert agent.env["NODE_NAME"] == "node-a" and agent.service_account == "koordlet"


def test_deployments_run_their_replicas_with_their_config_maps(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    schedulers = [r for n, r in runs.items() if n.startswith("koord-scheduler-")]
    assert {r.env["POD_NAME"] for r in schedulers} == {"koord-scheduler-0", "koord-scheduler-1"}
    config = next(a for a in schedulers[0].argv if a.startswith("--config=")).split("=", 1)[1]
    assert Path(config) in schedulers[0].files, "the ConfigMap's key is written where the mount puts it"
    assert "KubeSchedulerConfiguration" in schedulers[0].files[Path(config)]
    assert all(r.service_account == "koord-scheduler" for r in schedulers)
