"""``python -m tests.realcluster`` (``make cluster``/``make cluster-stop``): a real single-node Kubernetes
on this machine with our stack on it.

  build   build the Kubernetes binaries into the cache (a no-op when they are there)
  up      start the cluster and our processes; print the kubeconfig and what to try
  down    stop exactly what ``up`` started and remove what it left (mounts, cgroups, devices)
  status  the recorded processes and whether each still runs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tests.realcluster import binaries
from tests.realcluster.cluster import Cluster, default_state, preflight, reclaim
from tests.realcluster.procs import last_port


def _ours(c: Cluster) -> list[str]:
    """Our processes: host processes run as their pods would be, so kubectl lists their Leases and what
    they write, not pods."""
    lines = []
    for name, p in c.procs.items():
        if name.startswith("koord"):
            port = last_port(p)
            where = f"http://127.0.0.1:{port}/readyz" if port else "no port yet"
            lines.append(f"  {name:<22} pid {p.pid:<8} {'running' if p.running() else 'gone':<8} {where}")
    return lines


def _hints(c: Cluster) -> list[str]:
    kc = c.admin_kubeconfig
    ours = _ours(c)
    head = ["our processes (as their pods would run them; kubectl get leases -n koordinator-system):", *ours]
    return [
        *(head if ours else []),
        f"export KUBECONFIG={kc}",
        "kubectl get nodes,pods -A -o wide",
        "kubectl get nodemetrics,nodeslos -o wide",
        f"kubectl get node {c.node_name} -o jsonpath='{{.status.allocatable}}'   # batch-cpu, batch-memory",
        "kubectl get events -A --sort-by=.lastTimestamp",
        f"logs: {c.logs}/",
        "stop: make cluster-stop",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realcluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "up", "down", "status"))
    parser.add_argument(
        "--state", type=Path, default=None, help="state directory (default: $STATE/cluster, ./var/cluster)"
    )
    parser.add_argument("--no-stack", action="store_true", help="up: Kubernetes only, without our processes")
    parser.add_argument(
        "--no-node",
        action="store_true",
        help="up: etcd, kube-apiserver, kube-controller-manager only (no kubelet; beside a full cluster)",
    )
    parser.add_argument("--no-scheduler", action="store_true", help="up: without kube-scheduler")
    parser.add_argument("--timing-file", type=Path, default=None, help="build: write how long it took here")
    args = parser.parse_args(argv)
    state = (args.state or default_state()).resolve()
    try:
        if args.command == "build":
            began = time.monotonic()
            cached = binaries.expected().complete()
            b = binaries.build()
            took = "from the cache" if cached else f"built in {time.monotonic() - began:.0f} s"
            print(f"Kubernetes {b.version} binaries {took}: {b.bin_dir}")
            if args.timing_file is not None:
                args.timing_file.write_text(f"Kubernetes {b.version} binaries {took}\n")
            return 0
        if args.command == "up":
            if (state / "cluster.json").exists() and any(
                p.running() for p in Cluster.load(state).procs.values()
            ):
                print(
                    f"error: a cluster recorded in {state} still runs: make cluster-stop first",
                    file=sys.stderr,
                )
                return 2
            if not args.no_node:
                reclaim()
            why = "" if args.no_node else preflight(state)
            if why:
                print(f"error: {why}", file=sys.stderr)
                return 2
            c = Cluster(state, with_node=not args.no_node)
            c.up(with_stack=not args.no_stack, with_scheduler=not args.no_scheduler)
            print("\n".join(["", *_hints(c)]))
            return 0
        if not (state / "cluster.json").exists():
            print(f"no cluster recorded in {state}", file=sys.stderr)
            return 0 if args.command == "down" else 1
        c = Cluster.load(state)
        if args.command == "status":
            for p in c.procs.values():
                port = last_port(p) if p.name.startswith("koord") else None
                print(f"{p.name:<28} pid {p.pid:<8} {'running' if p.running() else 'gone':<8} {port or ''}")
            return 0
        left = c.down()
        for line in left:
            print(f"left behind: {line}", file=sys.stderr)
        if not left:
            (state / "cluster.json").unlink()
            print("stopped; nothing left behind")
        return 1 if left else 0
    except (RuntimeError, TimeoutError, binaries.BuildError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
