"""Property tests of the node QoS II plugins over random NodeSLOs and pods.

* Every value CgroupReconcile and BlkIOReconcile write passes the kernel's (the executor's) ranges:
  they never ask for a value the executor would refuse, and memory values keep min <= low, min <= high
  <= the limit.
* BE never gets more than LS: where the NodeSLO gives BE no more than LS (a percent, a range, a
  bandwidth), what reaches the kernel after rounding gives BE no more either (memory protection, L3
  ways, memory bandwidth, HTB guarantee and ceiling).
* Network QoS specs the plugin builds are always ones the kernel takes (rate <= ceil <= link, the
  system class keeps a rate), unless the NodeSLO itself over-commits the link.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from koordlet import api
from koordlet.system import resctrl
from koordlet.system.cgroups import validate
from koordlet.testing import make_harness, make_node, make_pod
from koordshared.apis.slo import nodeslo
from koordshared.runtime.errors import InvalidValue
from qosplugins import _memqos as mq
from qosplugins.blkio import BlkIOReconcile
from qosplugins.cgreconcile import CgroupReconcile
from qosplugins.netqos import build_spec

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GI = 1 << 30
PAGE = 4096
PCT = st.integers(0, 100)
BYTES = st.integers(0, 48 * GI)  # a request above allocatable (60 GiB here) is never scheduled
MEMORY_QOS = st.fixed_dictionaries(
    {
        "enable": st.booleans(),
        "minLimitPercent": PCT,
        "lowLimitPercent": PCT,
        "throttlingPercent": PCT,
        "wmarkRatio": PCT,
        "wmarkScalePermill": st.integers(1, 1000),
        "wmarkMinAdj": st.integers(-25, 50),
        "priority": st.integers(0, 12),
        "priorityEnable": st.integers(0, 1),
        "oomKillGroup": st.integers(0, 1),
    }
)
ANNOTATIONS = st.sampled_from(
    [{}, {"koordinator.sh/memoryQOS": '{"policy":"none"}'}, {"koordinator.sh/memoryQOS": '{"policy":"auto"}'}]
)


@st.composite
def pods(draw: Any) -> api.PodInfo:
    qos = draw(st.sampled_from([api.QOSClass.BE, api.QOSClass.LS, api.QOSClass.LSR, api.QOSClass.SYSTEM]))
    pod = make_pod("p", qos, containers=draw(st.integers(1, 3)), annotations=draw(ANNOTATIONS))
    cs = []
    for c in pod.containers:
        request, limit = draw(BYTES), draw(st.one_of(st.just(0), BYTES))
        limit = max(limit, request) if limit else 0  # the API server refuses a request above the limit
        cs.append(
            dataclasses.replace(
                c,
                memory_request_bytes=request,
                memory_limit_bytes=limit,
                batch_memory_request_bytes=request,
                batch_memory_limit_bytes=limit,
            )
        )
    return dataclasses.replace(pod, containers=tuple(cs))


@PROPS
@given(
    st.lists(pods(), max_size=6),
    st.fixed_dictionaries({k: MEMORY_QOS for k in ("lsrClass", "lsClass", "beClass", "systemClass")}),
    st.integers(1, 2),
)
def test_memory_qos_values_are_in_kernel_ranges(
    pod_list: list[api.PodInfo], classes: dict[str, Any], version: int
) -> None:
    h = make_harness(version=version, node=make_node(8000, 64 * GI, memory_allocatable_bytes=60 * GI))
    h.host.supported |= {"memory.min", "memory.low", "memory.high", *mq.KNOBS, "memory.oom.group"}
    if version == 1:
        h.host.supported |= {"memory.soft_limit_in_bytes"}
        h.host.supported -= {"memory.low"}
    for pod in pod_list:
        h.add_pod(pod)
    for d in h.host.dirs:  # the kernel's defaults in every cgroup
        for r in h.host.supported:
            h.host.values[(r, d)] = "-1" if r in ("memory.high", "memory.soft_limit_in_bytes") else "0"
    h.states.slo = nodeslo.build({"resourceQOSStrategy": {k: {"memoryQOS": v} for k, v in classes.items()}})
    h.start(CgroupReconcile())
    h.tick()
    assert h.executor.errors == []
    keys = {api.QOSClass.BE: "beClass", api.QOSClass.LS: "lsClass", api.QOSClass.LSR: "lsrClass"}
    slo = h.states.slo
    covered = [
        p
        for p in pod_list
        if mq.pod_config(p, slo.resource_qos.of(keys.get(p.qos, "systemClass")).memory_qos) is not None
    ]
    # pods and containers are written exactly when memory QoS covers their pod
    tiers = {"kubepods", "kubepods/burstable", "kubepods/besteffort"}
    pod_dirs = {u.cgroup_dir for u in h.executor.updates if u.cgroup_dir not in tiers}
    assert pod_dirs == {d for p in covered for d in (p.cgroup_dir, *(c.cgroup_dir for c in p.containers))}
    written: dict[tuple[str, str], str] = {}
    for u in h.executor.updates:
        assert validate(u.resource, u.value, online_cpus=None)  # raises if the kernel would refuse it
        written[(u.resource, u.cgroup_dir)] = validate(u.resource, u.value)  # as the kernel keeps it
    for pod in pod_list:
        for c in pod.containers:
            lo_min = int(written.get(("memory.min", c.cgroup_dir), "0"))
            low = int(written.get(("memory.low", c.cgroup_dir), "0"))
            high = int(written.get(("memory.high", c.cgroup_dir), "-1"))
            assert low == 0 or low >= lo_min
            if high != -1:
                assert high >= lo_min and high % PAGE == 0
                limit = c.batch_memory_limit_bytes if pod.is_best_effort else c.memory_limit_bytes
                assert high <= (limit or 60 * GI)


@PROPS
@given(BYTES, st.tuples(PCT, PCT), st.tuples(PCT, PCT))
def test_memory_protection_of_be_is_not_above_ls(
    request: int, be: tuple[int, int], ls: tuple[int, int]
) -> None:
    assume(be[0] <= ls[0] and be[1] <= ls[1])
    be_cfg = api.MemoryQOS(min_limit_percent=be[0], low_limit_percent=be[1])
    ls_cfg = api.MemoryQOS(min_limit_percent=ls[0], low_limit_percent=ls[1])
    be_min, be_low = mq.protection(request, be_cfg)
    ls_min, ls_low = mq.protection(request, ls_cfg)
    assert be_min <= ls_min <= request
    assert max(be_min, be_low) <= max(ls_min, ls_low) <= request


@PROPS
@given(st.integers(1, 20), st.lists(PCT, min_size=4, max_size=4).map(sorted), st.integers(1, 3))
def test_l3_ways_of_be_are_not_above_ls(ways: int, bounds: list[int], min_bits: int) -> None:
    l0, b0, b1, l1 = bounds  # LS's range contains BE's
    assume(b0 < b1)
    cbm = (1 << ways) - 1
    try:
        be = resctrl.l3_mask_from_percent(cbm, b0, b1, min_bits)
    except InvalidValue:
        return  # fewer ways than the hardware's minimum: refused before anything is written
    shifted = be // (be & -be)
    assert be & ~cbm == 0 and shifted & (shifted + 1) == 0  # contiguous, within the cache
    ls = resctrl.l3_mask_from_percent(cbm, l0, l1, min_bits)
    assert be.bit_count() <= ls.bit_count()


@PROPS
@given(st.integers(1, 100), st.integers(1, 100), st.sampled_from([10, 20, 25]), st.integers(1, 20))
def test_memory_bandwidth_of_be_is_not_above_ls(be: int, ls: int, gran: int, min_bw: int) -> None:
    assume(be <= ls)
    b, lv = resctrl.mba_intel(be, gran, min_bw), resctrl.mba_intel(ls, gran, min_bw)
    assert min_bw <= b <= lv <= max(100, min_bw) and b >= be
    assert resctrl.mba_amd(be) <= resctrl.mba_amd(ls) <= resctrl.AMD_MBA_UNLIMITED


BANDWIDTH = st.one_of(PCT, st.integers(0, 20_000).map(lambda m: f"{m}M"))


@PROPS
@given(
    st.integers(1, 100_000),
    st.fixed_dictionaries({"egressRequest": BANDWIDTH, "egressLimit": BANDWIDTH, "ingressLimit": BANDWIDTH}),
    st.fixed_dictionaries({"egressRequest": BANDWIDTH, "egressLimit": BANDWIDTH, "ingressLimit": BANDWIDTH}),
)
def test_network_specs_are_ones_the_kernel_takes(
    total_m: int, ls: dict[str, Any], be: dict[str, Any]
) -> None:
    slo = nodeslo.build(
        {
            "systemStrategy": {"totalNetworkBandwidth": f"{total_m}M"},
            "resourceQOSStrategy": {
                "lsClass": {"networkQOS": {"enable": True, **ls}},
                "beClass": {"networkQOS": {"enable": True, **be}},
            },
        }
    )
    spec = build_spec("eth0", slo, [])
    assert spec is not None
    for d in filter(None, (spec.egress, spec.ingress)):
        for lim in (d.ls, d.be):
            assert api.MIN_RATE_BPS <= lim.rate_bps <= lim.ceil_bps <= d.total_bps
    committed = spec.egress.ls.rate_bps + spec.egress.be.rate_bps
    if committed <= spec.egress.total_bps:
        spec.validate()
    l_cfg, b_cfg = slo.network_qos["lsClass"], slo.network_qos["beClass"]
    if 0 < b_cfg.egress_limit_bps <= l_cfg.egress_limit_bps:
        assert spec.egress.be.ceil_bps <= spec.egress.ls.ceil_bps
    ls_consistent = l_cfg.egress_limit_bps == 0 or l_cfg.egress_request_bps <= l_cfg.egress_limit_bps
    if b_cfg.egress_request_bps <= l_cfg.egress_request_bps and ls_consistent:
        # (an LS request above LS's own limit is cut to that limit: HTB needs rate <= ceil)
        assert spec.egress.be.rate_bps <= spec.egress.ls.rate_bps


IO = st.fixed_dictionaries(
    {},
    optional={
        "readBPS": st.integers(0, 1 << 40),
        "writeIOPS": st.integers(0, 1 << 20),
        "ioWeightPercent": st.integers(1, 100),
    },
)


@PROPS
@given(st.lists(IO, min_size=1, max_size=3), st.integers(1, 2))
def test_blkio_values_are_in_kernel_ranges(ios: list[dict[str, int]], version: int) -> None:
    h = make_harness(version=version)
    h.host.supported |= {
        "blkio.throttle.read_bps_device",
        "blkio.throttle.write_bps_device",
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_iops_device",
        "blkio.cost.weight",
    }
    names = [f"vd{chr(ord('b') + i)}" for i in range(len(ios))]
    h.host.block_devices = {n: f"252:{16 * (i + 1)}" for i, n in enumerate(names)}
    blocks = [{"name": n, "type": "device", "ioCfg": io} for n, io in zip(names, ios, strict=True)]
    h.states.slo = nodeslo.build(
        {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": blocks}}}}
    )
    h.start(BlkIOReconcile())
    h.tick()
    assert h.executor.errors == []
    assert len(h.executor.updates) == 5 * len(ios)
    for u in h.executor.updates:
        assert u.cgroup_dir == "kubepods/besteffort"
        assert validate(u.resource, u.value)
