"""The colocation loop end to end (``make loop`` runs the same story): the test API server, koord-manager,
koord-scheduler, koord-descheduler and three koordlets as processes, real cgroups and busy processes as
pods. One node driven hot is reported hot, kept off by koord-scheduler's LoadAwareScheduling, and relieved
by the descheduler through the Eviction API in Koordinator's order; a dry run evicts nothing; every
process and cgroup is gone afterwards."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from tests.loop import scenario
from tests.loop.report import problems, summary


@pytest.mark.root
@pytest.mark.slow
def test_the_colocation_loop(tmp_path: Path) -> None:
    lines: list[str] = []
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    started = time.monotonic()
    loop = scenario.Loop(tmp_path, lambda who, text: lines.append(f"{who}: {text}"))
    try:
        report = loop.run()
    except (TimeoutError, RuntimeError) as err:  # the narration says how far the story got
        raise AssertionError(f"{err}\n" + "\n".join(lines)) from err
    finally:
        loop.close()
    took = time.monotonic() - started
    parents = [k.cgroup_parent for k in loop.kubelets]
    assert len(parents) == 3
    narrated = "\n".join(lines)
    assert problems(report, scenario.HOT, scenario.NODES[1:]) == [], (
        f"{summary(report, scenario.HOT)}\n{narrated}"
    )
    # the narration says what each component decided, as it happened
    for who in (
        "koord-manager",
        "koordlets",
        "koord-scheduler",
        "koord-descheduler",
        "kubelet loop-a",
    ):
        assert any(line.startswith(who) for line in lines), who
    assert took < 150, f"the loop took {took:.0f}s"
    # nothing left: no process of ours, no cgroup of the simulated nodes
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], left
    for parent in parents:
        for controller in ("cpu", "cpuacct", "cpuset", "memory"):
            assert not Path("/sys/fs/cgroup", controller, parent).exists(), (
                f"{controller}/{parent} left behind"
            )
    assert os.path.isdir(tmp_path / "logs")
