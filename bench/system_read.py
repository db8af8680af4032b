"""Cost of the read layer: ``Host.read`` (validated path, O_NOFOLLOW open, v1/v2 translation) plus the
stat parsers, against the floor of a bare ``os.open``/``os.read``/``os.close`` of the same files.

Creates N real cgroups under a unique ``koordlet-test-<random>`` parent in cpu, cpuacct and memory,
reads ``cpuacct.usage``, ``cpu.stat`` and ``memory.stat`` of each (what the pod collector reads per
tick), alternating agent and floor over several rounds, and prints medians. Removes every cgroup.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time

from koordlet.system.cgroups import CgroupMode, detect_mode, resource_path
from koordlet.system.cgstats import parse_cpu_stat, parse_cpuacct_usage, parse_memory_stat
from koordlet.system.host import Host
from koordlet.system.paths import HostPaths
from koordlet.system.podpath import CgroupDriver
from koordlet.testing.cgroups import RealCgroupTree

NAME = "system_read"
CONTROLLERS = ("cpu", "cpuacct", "memory")
RESOURCES = ("cpuacct.usage", "cpu.stat", "memory.stat")


def agent_pass(host: Host, dirs: list[str]) -> int:
    total = 0
    for d in dirs:
        usage = host.read("cpuacct.usage", d)
        stat = host.read_raw("cpu.stat", d)
        mem = host.read_raw("memory.stat", d)
        if usage is None or stat is None or mem is None:
            continue
        total += parse_cpuacct_usage(usage) + parse_cpu_stat(stat).nr_periods + parse_memory_stat(mem).usage
    return total


def floor_pass(files: list[str]) -> int:
    total = 0
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            total += len(os.read(fd, 65536))
        finally:
            os.close(fd)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    # A SIGTERM (e.g. from `timeout`) must still run the cleanup of the cgroups we made.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    paths = HostPaths()
    if os.geteuid() != 0:
        print(json.dumps({"bench": NAME, "skipped": "needs root to create cgroups"}))
        return 0
    if detect_mode(paths) is not CgroupMode.V1:
        print(json.dumps({"bench": NAME, "skipped": "written for this cgroup v1 host"}))
        return 0
    n, rounds = (200, 7) if args.quick else (1000, 15)
    tree = RealCgroupTree(CONTROLLERS, root=paths.cgroup_root)
    parent = tree.parent
    try:
        for i in range(n):
            tree.mkdir(f"c{i}")
        host = Host(paths, CgroupMode.V1, CgroupDriver.CGROUPFS)
        dirs = [f"{parent}/c{i}" for i in range(n)]
        files = [str(resource_path(paths, CgroupMode.V1, r, d)) for d in dirs for r in RESOURCES]
        agent_ms: list[float] = []
        floor_ms: list[float] = []
        agent_pass(host, dirs)
        floor_pass(files)
        for _ in range(rounds):
            t = time.perf_counter()
            agent_pass(host, dirs)
            agent_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            floor_pass(files)
            floor_ms.append((time.perf_counter() - t) * 1000)
        agent, floor = statistics.median(agent_ms), statistics.median(floor_ms)
        print(
            json.dumps(
                {
                    "bench": NAME,
                    "cgroups": n,
                    "files_per_pass": len(files),
                    "agent_pass_ms": round(agent, 2),
                    "floor_pass_ms": round(floor, 2),
                    "agent_per_cgroup_us": round(agent * 1000 / n, 1),
                    "ratio": round(agent / floor, 2),
                }
            )
        )
    finally:
        tree.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
