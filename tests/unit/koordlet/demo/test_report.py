"""The demo's numbers from a recording (no root): the BE allowance is exactly the agent's BE-tier writes
(quota or cpuset; pod and container levels and other owners left out), the non-BE figure each write
subtracted, the setting in force at the start; the summary's reaction and recovery; the PNG is well
formed and carries the data; the demo refuses to run without root or cgroup v1."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from koordlet.cli import build_cli
from koordlet.demo import report
from koordlet.demo.chart import nice_step
from koordlet.demo.timeline import Recording
from koordlet.testing.cgroups import unavailable
from tests.support.pngread import pixels, text_chunks

T0 = 1_000_000.0
BE_CG = "koordlet-demo-x/kubepods/besteffort"


def quota(seq: int, t: float, value: int, budget: int, non_be: int, where: str = BE_CG) -> dict[str, Any]:
    return {
        "seq": seq,
        "time": T0 + t,
        "owner": "BECPUSuppress",
        "resource": "cpu.cfs_quota_us",
        "path": f"/sys/fs/cgroup/cpu/{where}/cpu.cfs_quota_us",
        "before": "-1",
        "after": str(value),
        "reason": f"BE budget {budget}m, non-BE {non_be}m",
        "phase": "final",
    }


def status(t: float, ls: float, be_used: float, system: float = 0.1) -> dict[str, Any]:
    return {
        "time": T0 + t,
        "node": {"systemCPUCores": system},
        "beCPU": {"cgroup": BE_CG, "allowedCores": 2.0, "usedCores": be_used},
        "pods": [
            {"qos": "LS", "cpuCores": ls},
            {"qos": "BE", "cpuCores": be_used},
            {"qos": "LSR", "cpuCores": None},
        ],
    }


def recording() -> Recording:
    rec = Recording(T0, 30.0, 2, spike=(10.0, 20.0), ls_idle=0.2, ls_spike=1.0)
    rec.docs = [
        status(t / 2, 1.2 if 10 <= t / 2 < 20 else 0.2, 0.05 if 10.5 <= t / 2 < 21 else 1.0)
        for t in range(61)
    ]
    rec.events = [
        quota(1, -0.5, 110000, 1100, 200),  # before the start: the setting in force at 0
        quota(2, 10.3, 2000, -100, 1400),
        {**quota(3, 10.3, 2000, -100, 1400, BE_CG + "/podx"), "owner": "BECPUSuppress"},  # a pod level
        {**quota(4, 12.0, 5000, 50, 1250), "owner": "CPUBurst"},  # another owner
        {**quota(5, 12.5, 3000, 30, 1270), "phase": "merge"},  # a first pass, not what stayed
        quota(6, 21.0, 22000, 220, 1080),
        quota(7, 22.0, 42000, 420, 880),
        quota(8, 23.0, 105000, 1050, 250),
        {
            **quota(9, 24.0, 1, 1, 1),
            "resource": "cpuset.cpus",
            "path": f"/x/cpuset/{BE_CG}/cpuset.cpus",
            "after": "0-1,3",
        },
        quota(10, 99.0, 2000, 0, 0),  # after the end
    ]
    return rec


def test_allowance_is_the_agents_be_tier_writes() -> None:
    s = report.series(recording())
    assert s["beAllowance"] == [
        [0.0, 1.1, 0],
        [10.3, 0.02, 2],
        [21.0, 0.22, 6],
        [22.0, 0.42, 7],
        [23.0, 1.05, 8],
        [24.0, 3.0, 9],
    ]
    assert s["nonBE"] == [[10.3, 1.4, 2], [21.0, 1.08, 6], [22.0, 0.88, 7], [23.0, 0.25, 8], [24.0, 0.001, 9]]
    assert s["lsDemand"][0] == [0.0, 0.2] and s["lsDemand"][25] == [12.5, 1.2]  # LS pods only, None as 0
    assert s["beUse"][0] == [0.0, 1.0] and s["system"][0] == [0.0, 0.1]


def test_unlimited_quota_is_the_whole_node() -> None:
    rec = recording()
    rec.events = [quota(1, 1.0, -1, 0, 0)]
    assert report.series(rec)["beAllowance"] == [[0.0, 2.0, 0], [1.0, 2.0, 1]]


def test_summary_tells_the_reaction_and_the_recovery() -> None:
    rec = recording()
    doc = report.data(rec)
    text = report.summary(doc, "demo-node", "cfsQuota", 65)
    assert "BE allowed 1.10, used 1.00" in text
    assert "the agent cut BE to 0.02 cores 0.30 s later (audit seq 2)" in text
    assert "LS used 1.20 of 1.20 cores asked" in text
    assert "BE allowance back to 1.05 cores at 23.0 s" in text
    assert "Note:" not in text
    for d in rec.docs:
        d["node"]["systemCPUCores"] = 1.5
    assert "Note: this machine was busy outside the demo (1.50 cores" in report.summary(
        report.data(rec), "demo-node", "cfsQuota", 65
    )


def test_png_is_well_formed_and_carries_the_numbers() -> None:
    doc = report.data(recording())
    data = report.plot(doc, "title")
    width, height, rgb = pixels(data)
    assert (width, height) == (960, 540) and len(rgb) == width * height * 3
    assert json.loads(text_chunks(data)[report.PNG_KEY]) == doc
    # the three series' colours are drawn (the chart is not blank)
    colours = {bytes(rgb[i : i + 3]) for i in range(0, len(rgb), 3)}
    assert {bytes(report.LS_COLOR), bytes(report.BE_COLOR), bytes(report.USE_COLOR)} <= colours


def test_axis_steps_are_round() -> None:
    assert [nice_step(x) for x in (2, 30, 1, 64)] == [0.5, 5.0, 0.2, 20.0]
    assert nice_step(30, 10) == 5.0


def test_refuses_without_root_or_cgroup_v1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cgroup.procs").write_text("")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert unavailable("the demo", tmp_path) == (
        f"the demo needs cgroup v1 with the cpuacct, cpuset, memory controller(s) mounted under {tmp_path}"
    )
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    out = CliRunner().invoke(build_cli([]), ["demo", "--duration", "30", "--out", str(tmp_path / "out")])
    assert out.exit_code == 2
    assert "run it as root" in out.output
    assert not (tmp_path / "out").exists()  # nothing made
