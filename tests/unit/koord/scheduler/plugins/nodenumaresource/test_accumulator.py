"""Which CPUs NodeNUMAResource's accumulator takes on the shared simulated node (2 sockets x 2 NUMA nodes x
2 cores x 2 threads: NUMA node n holds cores 2n, 2n+1 = CPUs {2n, 2n+1, 2n+8, 2n+9}), checked against
picks worked out by hand from Koordinator's order of preference (``cpu_accumulator.go``)."""

from __future__ import annotations

import pytest

from koord.scheduler.plugins.nodenumaresource.accumulator import (
    AllocationError,
    take_cpus,
    take_preferred_cpus,
)
from koord.scheduler.plugins.nodenumaresource.cputopology import AllocatedCPU, CPUTopology
from koordshared.apis.meta.cpulist import format_cpuset, parse_cpuset
from koordshared.testing.topology import TWO_SOCKETS, SimulatedTopology

TOPO = CPUTopology.of(TWO_SOCKETS.cpu_details())
ALL = TOPO.cpus
FULL, SPREAD = "FullPCPUs", "SpreadByPCPUs"
LEAST, MOST = "LeastAllocated", "MostAllocated"


def take(n: int, policy: str = FULL, *, taken: str = "", strategy: str = LEAST, exclusive: str = "") -> str:
    held = parse_cpuset(taken)
    allocated = {c: AllocatedCPU(1, exclusive) for c in held}
    return format_cpuset(take_cpus(TOPO, 1, ALL - held, allocated, n, policy, exclusive, strategy))


def test_the_shared_topology() -> None:
    assert (TOPO.num_cpus, TOPO.num_cores, TOPO.num_nodes, TOPO.num_sockets) == (16, 8, 4, 2)
    assert (TOPO.cpus_per_core(), TOPO.cpus_per_node(), TOPO.cpus_per_socket()) == (2, 4, 8)
    assert TOPO.cpus_in_nodes(1) == {2, 3, 10, 11}


@pytest.mark.parametrize(
    ("n", "want"),
    [
        (2, "0,8"),  # one whole core of the first NUMA node
        (4, "0-1,8-9"),  # the whole NUMA node 0
        (6, "0-2,8-10"),  # more than a NUMA node: whole cores of socket 0
        (8, "0-3,8-11"),  # socket 0
        (10, "0-4,8-12"),  # socket 0 whole, then a core of socket 1
        (3, "0-1,8"),  # preferred FullPCPUs with an odd count: cores first, a thread of the next
    ],
)
def test_full_pcpus_on_an_idle_node(n: int, want: str) -> None:
    assert take(n) == want


def test_least_allocated_picks_the_emptiest_numa_node_then_socket() -> None:
    # core 0 taken: NUMA nodes 1..3 are as empty, socket 1 is emptier than socket 0
    assert take(2, taken="0,8") == "4,12"
    assert take(4, taken="0,8") == "4-5,12-13"


def test_most_allocated_packs_the_fullest_numa_node() -> None:
    assert take(2, taken="0,8", strategy=MOST) == "1,9"
    # node 0 has one free core only: 4 CPUs come from the fullest node that has them, on socket 0
    assert take(4, taken="0,8", strategy=MOST) == "2-3,10-11"


@pytest.mark.parametrize(
    ("n", "taken", "want"),
    [
        (2, "", "0-1"),  # one CPU on each core of NUMA node 0
        (4, "", "0-1,8-9"),  # no NUMA node has 4 cores: Koordinator stays on one NUMA node
        (3, "", "0-1,8"),
        (2, "0,4-5,8,12-13", "2-3"),  # the emptiest NUMA nodes (1, 3): 1 is on the emptier socket
    ],
)
def test_spread_by_pcpus(n: int, taken: str, want: str) -> None:
    assert take(n, SPREAD, taken=taken) == want


def test_pcpu_level_exclusive_avoids_cores_an_exclusive_pod_holds() -> None:
    # CPU 0 held: packing (MostAllocated) takes the rest of NUMA node 0, its sibling 8 included...
    assert take(2, SPREAD, taken="0", strategy=MOST) == "1,8"
    # ...unless both pods are PCPULevel exclusive: core 0 is avoided, and node 0 has one core left
    assert take(2, SPREAD, taken="0", strategy=MOST, exclusive="PCPULevel") == "2-3"


def test_numa_level_exclusive_avoids_the_numa_node_of_an_exclusive_pod() -> None:
    assert take(2, taken="0,8", exclusive="NUMANodeLevel", strategy=MOST) == "2,10"


def test_not_enough_cpus() -> None:
    with pytest.raises(AllocationError, match="not enough cpus available to satisfy request"):
        take(5, taken="0-11")


def test_preferred_cpus_first() -> None:
    got = take_preferred_cpus(TOPO, 1, ALL, frozenset({6, 14}), {}, 4, FULL, "", LEAST)
    assert format_cpuset(got) == "0,6,8,14"


def test_no_smt_node_takes_cores_for_any_policy() -> None:
    topo = CPUTopology.of(SimulatedTopology(sockets=1, numa_per_socket=2, cores_per_numa=2).cpu_details())
    got = take_cpus(topo, 1, topo.cpus, {}, 2, SPREAD, "", LEAST)
    assert format_cpuset(got) == "0-1"
