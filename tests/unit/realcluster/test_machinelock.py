"""The real-cluster lock the real tier and the benches share."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from tests.realcluster import machinelock
from tests.realcluster.machinelock import machine_lock


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "real-cluster.lock"
    monkeypatch.setattr(machinelock, "LOCK", path)
    return path


def test_a_free_machine_is_ours_and_the_lock_is_held_until_the_end(lock: Path) -> None:
    with machine_lock(0, lambda: "") as verdict:
        assert verdict.held and verdict.busy == ""
        other = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    with machine_lock(0, lambda: "") as again:
        assert again.held


def test_another_holder_past_the_wait_is_a_verdict_not_a_hang(lock: Path) -> None:
    holder = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        with machine_lock(0, lambda: "") as verdict:
            assert not verdict.held and "another real cluster" in verdict.busy
    finally:
        os.close(holder)


def test_a_cluster_started_without_the_lock_is_named(lock: Path) -> None:
    asked: list[int] = []

    def ready() -> str:
        asked.append(1)
        return "a kubepods cgroup already exists"

    with machine_lock(0, ready) as verdict:
        assert verdict.held and verdict.busy == "a kubepods cgroup already exists" and asked == [1]
