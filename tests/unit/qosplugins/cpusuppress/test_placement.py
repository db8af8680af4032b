"""BECPUSuppress's cpuset placement as Koordinator's: sibling pairs first, growth steps, the CPUs BE never
gets (LSE, exclusive system QoS), the kubelet static policy and the ``BECPUManager`` gate."""

from __future__ import annotations

import json

import pytest

from koordlet import api
from koordlet.testing import Harness, be_slo, make_harness, make_node, make_pod
from qosplugins.cpusuppress import cpuset as _cpuset
from tests.unit.qosplugins.cpusuppress.test_plugin import BE, HT8, set_usage, setup_load, started

ADJACENT4 = [api.CPUInfo(cpu=i, core=i // 2) for i in range(4)]  # siblings (0,1) and (2,3)


def lse_pod(h: Harness, cpus: str) -> api.PodInfo:
    status = json.dumps({"cpuset": cpus})
    return h.add_pod(
        make_pod("lse", api.QOSClass.LSE, annotations={_cpuset.RESOURCE_STATUS_ANNOTATION: status})
    )


def test_cpuset_takes_a_whole_sibling_pair_next_to_an_lse_hole() -> None:
    """With CPU 0 bound to an LSE pod, BE gets the pair {2,3}, not CPU 1 (the LSE
    pod's hyper-thread sibling) plus CPU 2."""
    h = make_harness(
        1, ADJACENT4, node=make_node(4000, 16 << 30), slo=be_slo(cpu_suppress_threshold_percent=100)
    )
    lse_pod(h, "0")
    setup_load(h, ls_cores=1.8, be_cores=0.5, system_cores=0.3)
    started(h).reconcile()
    # budget = 4000 * 100% - (1800 + 300) = 1900m -> 2 CPUs from {1, 2, 3}
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == {2, 3}


def test_cpuset_growth_steps_take_pairs_then_singles() -> None:
    """Koordinator's growth sequence on 8 CPUs (siblings c and c+4), an LSE pod on CPU 1: +1 CPU a tick
    (ceil(8 * 10 %)), each step re-picked pairs first, then singles."""
    h = make_harness(1, HT8, slo=be_slo(cpu_suppress_threshold_percent=100))
    lse_pod(h, "1")
    ls, be = setup_load(h, ls_cores=6.0, be_cores=0.5, system_cores=0.5)
    plugin = started(h)
    plugin.reconcile()  # budget 8000 - 6500 = 1500m -> 2 CPUs
    seen = [sorted(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or ""))]
    for _ in range(4):
        h.clock.advance(1)
        set_usage(h, ls, be, 0.5, 0.5, 0.5)  # budget 7000m -> 7 usable wanted, growth +1 a tick
        plugin.reconcile()
        seen.append(sorted(api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "")))
    # usable by (core, cpu): 0,4 (c0), 5 (c1, its sibling 1 is LSE's), 2,6 (c2), 3,7 (c3)
    # 3: pair (0,4) + first free single 5; 4: pairs (0,4),(2,6) (a single-first walk gave 5 and 2)
    # 5: (0,4),(2,6) + 5; 6: (0,4),(2,6),(3,7)
    assert seen == [[0, 4], [0, 4, 5], [0, 2, 4, 6], [0, 2, 4, 5, 6], [0, 2, 3, 4, 6, 7]]


@pytest.mark.parametrize(("exclusive", "expected"), [(None, {1, 5}), (True, {1, 5}), (False, {0, 4})])
def test_exclusive_system_qos_cpus_are_not_given_to_be(exclusive: bool | None, expected: set[int]) -> None:
    """``node.koordinator.sh/system-qos-resource`` CPUs are left out of BE's pick
    while exclusive (the default when ``cpusetExclusive`` is absent)."""
    res: dict[str, object] = {"cpuset": "0,4"}
    if exclusive is not None:
        res["cpusetExclusive"] = exclusive
    node = make_node(8000, 16 << 30, annotations={_cpuset.SYSTEM_QOS_ANNOTATION: json.dumps(res)})
    h = make_harness(1, HT8, node=node, slo=be_slo())
    setup_load(h, ls_cores=2.0, be_cores=3.0, system_cores=2.0)
    started(h).reconcile()
    # budget = 5200 - (2000 + 2000) = 1200m -> 2 CPUs: the first free sibling pair, (0,4) unless the
    # system QoS holds it exclusively, then (1,5)
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == expected


def test_kubelet_static_policy_confines_containers_only() -> None:
    """Under the kubelet's static CPU manager the tier and pod cpusets stay at every
    usable CPU (the kubelet writes container cpusets and needs room above them); BE containers get the
    suppressed set."""
    node = make_node(8000, 16 << 30, kubelet_cpu_manager_policy="static")
    h = make_harness(1, HT8, node=node, slo=be_slo())
    _, be = setup_load(h, ls_cores=2.0, be_cores=3.0)
    started(h).reconcile()
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == set(range(8))
    assert api.parse_cpuset(h.host.read("cpuset.cpus", be.cgroup_dir) or "") == set(range(8))
    assert api.parse_cpuset(h.host.read("cpuset.cpus", be.containers[0].cgroup_dir) or "") == {0, 1, 4}
    assert h.executor.errors == []


def test_be_cpu_manager_gate_only_recovers() -> None:
    """With ``BECPUManager`` on, BE cpusets are the runtime hook's: nothing is
    suppressed, the tier, pods and unplaced containers get every usable CPU back, a pod placed by the
    scheduler (``resource-status``) keeps its containers' cpusets, and the quota goes back to -1."""
    h = make_harness(1, HT8, slo=be_slo())
    h.agent = api.AgentOptions(feature_gates={"BECPUSuppress": True, "BECPUManager": True})
    _, be = setup_load(h, ls_cores=6.0, be_cores=1.0)
    status = json.dumps({"numaNodeResources": [{"node": 0}]})
    placed = h.add_pod(
        make_pod("placed", annotations={_cpuset.RESOURCE_STATUS_ANNOTATION: status}), cpuset="2-3"
    )
    h.host.values[("cpu.cfs_quota_us", BE)] = "400000"
    h.host.values[("cpuset.cpus", be.containers[0].cgroup_dir)] = "0-1"
    started(h).reconcile()
    assert api.parse_cpuset(h.host.read("cpuset.cpus", BE) or "") == set(range(8))
    assert api.parse_cpuset(h.host.read("cpuset.cpus", be.containers[0].cgroup_dir) or "") == set(range(8))
    assert h.host.read("cpuset.cpus", placed.containers[0].cgroup_dir) == "2-3"
    assert h.host.read("cpu.cfs_quota_us", BE) == "-1"
