"""Network QoS real tests' bench: two network namespaces joined by a veth pair (the ``veth_pair`` fixture
of this directory's conftest) with LS and BE addresses on side A and iperf3 servers on side B, and
concurrent LS/BE iperf3 flows between them. Only addresses inside these namespaces carry traffic."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

M = 1_000_000
SERVER, LS_IP, BE_IP = "192.0.2.2", "192.0.2.10", "192.0.2.20"
LS_PORT, BE_PORT = 5301, 5302


@dataclass
class Pair:
    a: str
    b: str
    dev: str


def start_servers(pair: Pair) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            ["ip", "netns", "exec", pair.b, "iperf3", "-s", "-B", SERVER, "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in (LS_PORT, BE_PORT)
    ]


def flows(pair: Pair, *, reverse: bool = False, seconds: int = 3) -> dict[str, float]:
    """Concurrent LS and BE TCP flows; Mbit/s each got as the receiver counted (first second omitted)."""
    procs = {
        name: subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                pair.a,
                "iperf3",
                "-c",
                SERVER,
                "-p",
                str(port),
                "-B",
                src,
                "-t",
                str(seconds),
            ]
            + ["-O", "1", "-J", "--connect-timeout", "3000"]
            + (["-R"] if reverse else []),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, port, src in (("LS", LS_PORT, LS_IP), ("BE", BE_PORT, BE_IP))
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=seconds + 30)
        report = json.loads(stdout or b"{}")
        assert proc.returncode == 0, (name, report.get("error"), stderr[-500:])
        out[name] = report["end"]["sum_received"]["bits_per_second"] / M
    return out
