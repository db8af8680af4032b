"""What a killed run left on the node: taken down when nothing of it lives, left alone when something
does (a live cluster, anyone's kubelet, a process in the ``kubepods`` cgroups)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from koordlet.testing.cgroups import RealCgroupTree, unavailable
from tests.realcluster import cluster, node, owner
from tests.realcluster.procs import Started, start_ticks, wait_until


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "owner.json"
    monkeypatch.setattr(owner, "RECORD", path)
    return path


def test_the_record_names_its_state_and_its_stop_drops_only_its_own(record: Path, tmp_path: Path) -> None:
    mine, later = tmp_path / "mine", tmp_path / "later"
    owner.claim(mine)
    rec = owner.recorded()
    assert rec is not None and rec.state == mine and rec.starter_alive()
    owner.claim(later)
    owner.release(mine)
    assert owner.recorded() == owner.Owner(later, rec.pid, rec.ticks), "a later cluster's record stays"
    owner.release(later)
    assert not record.exists()
    record.write_text("{not json")
    assert owner.recorded() is None


class Node:
    """The node's machine-wide things as :func:`cluster.reclaim` sees them, in memory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cgroups = [Path("/sys/fs/cgroup/cpu/kubepods")]
        self.devices = {node.POD_BRIDGE}
        self.kubelet = False
        self.tasks: set[int] = set()
        self.removed: list[Path] = []
        for name, fake in {
            "kubepods_dirs": lambda: list(self.cgroups),
            "links": lambda: set(self.devices),
            "kubelet_running": lambda: self.kubelet,
            "kubepods_tasks": lambda: set(self.tasks),
            "remove_cgroup_tree": self._rmdir,
            "delete_links": self._delete,
            "mounts_under": lambda *_: [],
        }.items():
            monkeypatch.setattr(node, name, fake)

    def _rmdir(self, top: Path) -> list[str]:
        self.removed.append(top)
        self.cgroups.remove(top)
        return []

    def _delete(self) -> list[str]:
        self.devices.clear()
        return []


def _dead_process() -> tuple[int, int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ticks = start_ticks(child.pid)
    child.kill()
    child.wait()
    assert ticks is not None
    return child.pid, ticks


def _past_cluster(state: Path, pid: int, ticks: int) -> cluster.Cluster:
    """A cluster's record as a killed run leaves it: its processes recorded, none running."""
    state.mkdir()
    past = cluster.Cluster(state, with_node=False)
    past.adopt(Started("kubelet", pid, ticks, "", ("kubelet",)))
    return past


def test_a_killed_runs_leftovers_are_taken_down_and_its_own_stop_runs(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = Node(monkeypatch)
    pid, ticks = _dead_process()
    state = tmp_path / "past"
    _past_cluster(state, pid, ticks)
    record.write_text(json.dumps({"state": str(state), "pid": pid, "ticks": ticks}))
    stopped: list[Path] = []

    def down(self: cluster.Cluster, say: object = print) -> list[str]:
        stopped.append(self.state)
        return []

    monkeypatch.setattr(cluster.Cluster, "down", down)
    said: list[str] = []
    done = cluster.reclaim(said.append)
    assert stopped == [state], "the killed run's own stop undoes what it recorded"
    assert machine.removed == [Path("/sys/fs/cgroup/cpu/kubepods")] and not machine.devices
    assert not record.exists()
    assert any("kubepods" in line for line in done) and said
    assert cluster.reclaim(said.append) == [], "nothing left: nothing done"


def test_a_live_cluster_is_not_touched(record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = Node(monkeypatch)
    owner.claim(tmp_path / "starting")  # this process starts it: its processes are not recorded yet
    assert cluster.reclaim(lambda _: None) == []
    assert machine.cgroups and machine.devices and record.exists()
    pid, ticks = _dead_process()
    state = tmp_path / "running"
    init = start_ticks(1)
    assert init is not None
    _past_cluster(state, pid, ticks).adopt(Started("etcd", 1, init, "", ("etcd",)))
    record.write_text(json.dumps({"state": str(state), "pid": pid, "ticks": ticks}))
    assert cluster.reclaim(lambda _: None) == [], "one recorded process runs: the cluster is alive"
    assert machine.cgroups and machine.devices and record.exists()


@pytest.mark.parametrize("holder", ["kubelet", "task"])
def test_without_a_record_a_kubelet_or_a_task_in_kubepods_keeps_the_node(
    record: Path, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    machine = Node(monkeypatch)
    if holder == "kubelet":
        machine.kubelet = True
    else:
        machine.tasks = {1}
    assert cluster.reclaim(lambda _: None) == []
    assert machine.cgroups and machine.devices
    machine.kubelet, machine.tasks = False, set()
    assert cluster.reclaim(lambda _: None), "empty cgroups and the project's bridge are nobody's"
    assert not machine.cgroups and not machine.devices


@pytest.mark.root
def test_kubepods_tasks_and_the_tree_removal_on_real_cgroups(tmp_path: Path) -> None:
    """The real kernel: a process in a nested kubepods tree is found; the emptied tree is removed."""
    why = unavailable("this test")
    if why:
        pytest.fail(why)
    with RealCgroupTree(("cpu",), parent=f"koordlet-reclaim-{os.getpid()}") as tree:
        tree.mkdir("kubepods/besteffort/pod1")
        root = tmp_path / "root"
        root.mkdir()
        (root / "cpu").symlink_to(tree.path("cpu"))
        top = root / "cpu" / "kubepods"
        sleeper = tree.python("kubepods/besteffort/pod1", "import time; time.sleep(30)")
        assert node.kubepods_dirs(root) == [top]
        assert sleeper.pid in node.kubepods_tasks(root)
        assert node.remove_cgroup_tree(top), "a cgroup with a task stays"
        tree.kill([sleeper])
        wait_until("the killed task leaves its cgroup", lambda: not node.kubepods_tasks(root), 5.0)
        assert node.remove_cgroup_tree(top) == []
        assert node.kubepods_dirs(root) == []


@pytest.mark.root
def test_the_lock_question_takes_a_killed_runs_leftovers_down_first(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the tier and the benches ask while they hold the machine lock: a killed run's leftovers are no
    reason to wait or refuse; a live kubelet's are."""
    machine = Node(monkeypatch)
    machine.kubelet = True
    assert "kubepods" in cluster.ready(tmp_path / "state", lambda _: None)
    machine.kubelet = False
    assert cluster.ready(tmp_path / "state", lambda _: None) == ""
    assert not machine.cgroups and not machine.devices


def test_a_killed_kubelet_left_a_zombie_runs_no_more(tmp_path: Path) -> None:
    """A kubelet killed with its session waits as a zombie until init reaps it: it holds nothing."""
    (tmp_path / "kubelet").symlink_to(shutil.which("sleep") or "/bin/sleep")
    child = subprocess.Popen([str(tmp_path / "kubelet"), "30"])
    try:
        assert node.kubelet_running()
        child.kill()
        wait_until("the child is a zombie", lambda: not node.alive(child.pid), 5.0)
        assert Path(f"/proc/{child.pid}").exists(), "not reaped yet"
        assert not node.kubelet_running()
    finally:
        child.kill()
        child.wait()
