"""The real-cluster tier: one real cluster (:mod:`tests.realcluster`) for the whole folder, started through
the same command ``make cluster`` runs, stopped after the folder's last test.

The cluster owns machine-wide things (the ``kubepods`` cgroups, the node's devices), so no other test of
the session runs while it is up: pytest runs this folder's tests together, and the package-scoped fixture
stops the cluster when they are done. The stop is itself a test (``test_stop_leaves_nothing_behind``,
run last); the fixture's own stop afterwards is a no-op then.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realcluster.cluster import Cluster, ready
from tests.realcluster.footprint import Footprint
from tests.realcluster.machinelock import machine_lock

LAST = "test_stop_leaves_nothing_behind"
_timing: dict[str, float] = {}
BEFORE: list[Footprint] = []
"""The machine before the cluster started, for the stop test."""
UP_OUTPUT: list[str] = []
"""What ``up`` printed (its steps and their times), for the tests of the command itself."""


def _in_tier(item: pytest.Item) -> bool:
    return Path(__file__).parent in item.path.parents


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here needs the real cluster (``tests/conftest.py`` gates the marker); the stop test runs
    after every other test of the folder."""
    for item in items:
        if _in_tier(item):
            item.add_marker(pytest.mark.real_cluster)
    last = [i for i in items if i.name == LAST and _in_tier(i)]
    for item in last:
        items.remove(item)
    tier = [n for n, i in enumerate(items) if _in_tier(i)]
    at = tier[-1] + 1 if tier else len(items)
    items[at:at] = last


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _timing:
        return
    parts = [os.environ.get("KOORD_REAL_BUILD", "").strip() or "binaries: built before this run"]
    if "up" in _timing:
        parts.append(f"cluster up in {_timing['up']:.1f} s")
    if "tier" in _timing:
        parts.append(f"tier {_timing['tier']:.0f} s")
    terminalreporter.write_line("real-cluster tier: " + ", ".join(parts))


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The running cluster with our stack, brought up by ``python -m tests.realcluster up``."""
    state = tmp_path_factory.mktemp("real")
    with _machine(state):
        yield from _cluster(state)


@contextlib.contextmanager
def _machine(state: Path) -> Iterator[None]:
    """The machine for this tier alone: one real cluster per machine (the kubelet's cgroups, the node's
    devices), and another tier's footprint must not land in this one's stop test. With
    KOORD_REAL_WAIT=<seconds>, wait for another tier or cluster to finish; by default fail at once."""
    wait = float(os.environ.get("KOORD_REAL_WAIT", "0") or 0)
    with machine_lock(wait, lambda: ready(state)) as verdict:
        if not verdict.held:
            pytest.fail("another real-cluster tier holds this machine (set KOORD_REAL_WAIT to wait)")
        yield


def _cluster(state: Path) -> Iterator[Cluster]:
    BEFORE.append(Footprint.now())
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tests.realcluster", "up", "--state", str(state)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    _timing["up"] = time.monotonic() - began
    c = Cluster.load(state) if (state / "cluster.json").exists() else None
    if done.returncode != 0:
        if c is not None:
            c.down()
        pytest.fail(f"the real cluster did not come up:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    assert c is not None
    UP_OUTPUT.append(done.stdout)
    yield c
    c.down()
    _timing["tier"] = time.monotonic() - began
