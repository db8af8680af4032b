"""Each hook's answers against Koordinator's rules and numbers (``hooks/*``): BatchResource's formulas,
CPUSetAllocator's seven cpuset rules on the contract's 2-socket topology, GroupIdentity's values by class,
OOMScoreAdj's annotations, CoreSched's groups."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordlet import api
from koordlet.runtimehooks import coresched, groupidentity
from koordlet.runtimehooks.batchresource import (
    EXTENDED_RESOURCE_SPEC,
    BatchResource,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from koordlet.runtimehooks.cpuset import CPUSetAllocator
from koordlet.runtimehooks.groupidentity import GroupIdentity
from koordlet.runtimehooks.oomscoreadj import OOMScoreAdj
from koordlet.runtimehooks.protocol import ContainerRequest, PodRequest, Resources, Rule, request_qos
from koordlet.testing import be_slo, make_pod
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.testing.topology import TWO_SOCKETS

GiB = 1 << 30
STATUS = "scheduling.koordinator.sh/resource-status"
POOLS = nrt.pools_from_cpus(TWO_SOCKETS.cpu_details())


def batch_pod(
    *containers: tuple[int, int, int], qos: api.QOSClass = api.QOSClass.BE, **kw: Any
) -> api.PodInfo:
    """A BE pod whose containers ask for (batch-cpu request, batch-cpu limit, batch-memory limit)."""
    pod = make_pod("batch", qos, containers=len(containers), **kw)
    cs = tuple(
        api.ContainerInfo(
            c.name,
            c.container_id,
            cgroup_dir=c.cgroup_dir,
            batch_cpu_request_milli=req,
            batch_cpu_limit_milli=lim,
            batch_memory_request_bytes=mem,
            batch_memory_limit_bytes=mem,
        )
        for c, (req, lim, mem) in zip(pod.containers, containers, strict=True)
    )
    return api.PodInfo(**{**_fields(pod), "containers": cs})


def _fields(pod: api.PodInfo) -> dict[str, Any]:
    return {f: getattr(pod, f) for f in pod.__slots__}


def ask_pod(hook: Any, pod: api.PodInfo, rule: Rule | None = None) -> Resources:
    answer: Resources = hook.pod(PodRequest(pod, request_qos(pod)), rule or Rule())
    return answer


def ask_container(hook: Any, pod: api.PodInfo, rule: Rule | None = None, i: int = 0) -> Resources:
    answer: Resources = hook.container(
        ContainerRequest(pod, request_qos(pod), pod.containers[i]), rule or Rule()
    )
    return answer


# ---- BatchResource -------------------------------------------------------------------------------------


def test_batch_pod_of_the_acceptance() -> None:
    pod = batch_pod((1500, 3000, GiB))
    hook = BatchResource()
    want = Resources(cpu_shares=1536, cfs_quota=300000, memory_limit=GiB)
    assert ask_pod(hook, pod) == want
    assert ask_container(hook, pod) == want


def test_batch_pod_sums_and_unlimited_containers() -> None:
    pod = batch_pod((1000, 2000, GiB), (500, 0, 0))
    hook = BatchResource()
    # the second container has no limit: the pod is unlimited, its request still counts in the shares
    assert ask_pod(hook, pod) == Resources(cpu_shares=1536, cfs_quota=-1, memory_limit=-1)
    assert ask_container(hook, pod, i=1) == Resources(cpu_shares=512, cfs_quota=-1, memory_limit=-1)
    assert ask_pod(hook, batch_pod((1000, 2000, GiB), (500, 1000, GiB))) == Resources(
        cpu_shares=1536, cfs_quota=300000, memory_limit=2 * GiB
    )


def test_batch_quota_is_unlimited_under_cfs_quota_suppression() -> None:
    pod = batch_pod((1500, 3000, GiB))
    rule = Rule(slo=be_slo(cpu_suppress_policy="cfsQuota"))
    assert ask_pod(BatchResource(), pod, rule).cfs_quota == -1
    assert ask_container(BatchResource(), pod, rule).cfs_quota == -1
    # cpuset suppression, or suppression off: the quota stands
    assert ask_pod(BatchResource(), pod, Rule(slo=be_slo(cpu_suppress_policy="cpuset"))).cfs_quota == 300000


def test_batch_only_for_labelled_be_pods_with_batch_resources() -> None:
    hook = BatchResource()
    assert ask_pod(hook, batch_pod((1500, 3000, GiB), qos=api.QOSClass.LS)).empty
    unlabelled = make_pod("plain", kube_qos=api.KubeQOSClass.BESTEFFORT)  # BE by default, not by label
    assert ask_pod(hook, unlabelled).empty
    assert ask_pod(hook, make_pod("be")).empty  # labelled BE without batch resources: kubelet's values stay


def test_batch_resources_from_the_annotation() -> None:
    spec = {
        "containers": {
            "c0": {
                "requests": {"kubernetes.io/batch-cpu": "1k"},
                "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "512Mi"},
            }
        }
    }
    pod = make_pod("ann", annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)})
    assert ask_pod(BatchResource(), pod) == Resources(
        cpu_shares=1024, cfs_quota=200000, memory_limit=512 << 20
    )
    bad = make_pod("bad", annotations={EXTENDED_RESOURCE_SPEC: "{nope"})
    assert ask_pod(BatchResource(), bad).empty


@pytest.mark.parametrize(
    ("milli", "shares", "quota"),
    [(0, 2, -1), (1, 2, 1000), (5, 5, 1000), (1000, 1024, 100000), (10**9, 262144, 10**11), (-5, 2, -1)],
)
def test_koordinator_conversions(milli: int, shares: int, quota: int) -> None:
    assert (milli_cpu_to_shares(milli), milli_cpu_to_quota(milli)) == (shares, quota)


# ---- CPUSetAllocator ------------------------------------------------------------------------------------


RULE = Rule(share_pools=POOLS, be_share_pools=POOLS, kubelet_policy="none")


def cpuset(pod: api.PodInfo, rule: Rule = RULE) -> Resources:
    return ask_container(CPUSetAllocator(), pod, rule)


def test_bound_pods_get_their_cpus_and_no_quota() -> None:
    lsr = make_pod("lsr", api.QOSClass.LSR, annotations={STATUS: '{"cpuset":"0-1,8-9"}'})
    assert cpuset(lsr) == Resources(cpuset="0-1,8-9", cfs_quota=-1)
    assert ask_pod(CPUSetAllocator(), lsr, RULE) == Resources(cfs_quota=-1)
    # before the node topology is known the scheduler's choice still applies
    assert cpuset(lsr, Rule()) == Resources(cpuset="0-1,8-9", cfs_quota=-1)
    # an unlabelled pod with a cpuset counts as LSR (Koordinator's PodQOSFilter)
    plain = make_pod("g", kube_qos=api.KubeQOSClass.GUARANTEED, annotations={STATUS: '{"cpuset":"3"}'})
    assert cpuset(plain) == Resources(cpuset="3", cfs_quota=-1)
    # --disable-unset-cpu-quota
    keep = Rule(share_pools=POOLS, unset_cpu_quota=False)
    assert cpuset(lsr, keep) == Resources(cpuset="0-1,8-9") and ask_pod(CPUSetAllocator(), lsr, keep).empty
    # a malformed placement binds nothing: the pod gets what its class gets
    broken = make_pod("x", api.QOSClass.LS, annotations={STATUS: '{"cpuset":"7-3"}'})
    assert cpuset(broken) == Resources(cpuset="0-15")


def test_pools_by_class() -> None:
    assert cpuset(make_pod("ls", api.QOSClass.LS)) == Resources(cpuset="0-15")
    assert cpuset(make_pod("burstable", kube_qos=api.KubeQOSClass.BURSTABLE)) == Resources(cpuset="0-15")
    assert cpuset(make_pod("be")).empty  # the besteffort tier is BECPUSuppress's
    assert cpuset(make_pod("ls", api.QOSClass.LS), Rule()).empty  # pools not known yet
    static = Rule(share_pools=POOLS, kubelet_policy="static")
    assert cpuset(make_pod("g", kube_qos=api.KubeQOSClass.GUARANTEED), static).empty  # the kubelet's
    assert cpuset(make_pod("ls", api.QOSClass.LS), static) == Resources(cpuset="0-15")
    system = Rule(share_pools=POOLS, system_qos_cpuset="15")
    assert cpuset(make_pod("sys", api.QOSClass.SYSTEM), system) == Resources(cpuset="15")


def test_numa_placed_pods_get_their_nodes_pools() -> None:
    placed = json.dumps(
        {"numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}}, {"node": 3, "resources": {}}]}
    )
    ls = make_pod("ls", api.QOSClass.LS, annotations={STATUS: placed})
    assert cpuset(ls) == Resources(cpuset="2-3,10-11")  # node 3 got no CPU
    be = make_pod("be", annotations={STATUS: placed})
    be_pools = tuple(p if p.node != 1 else nrt.CPUSharedPool(0, 1, "3,11") for p in POOLS)
    manager = Rule(share_pools=POOLS, be_share_pools=be_pools, be_cpu_manager=True)
    assert cpuset(be, manager) == Resources(cpuset="3,11")
    assert cpuset(be).empty  # without BECPUManager BE stays with suppression


# ---- GroupIdentity, OOMScoreAdj, CoreSched --------------------------------------------------------------


def slo_with(cpu_policy: str | None, **classes: dict[str, Any]) -> api.NodeSLO:
    strategy: dict[str, Any] = {k: {"cpuQOS": v} for k, v in classes.items()}
    if cpu_policy is not None:
        strategy["policies"] = {"cpuPolicy": cpu_policy}
    return api.NodeSLO(resource_qos_strategy=strategy)


def test_group_identity_values() -> None:
    on = {"enable": True, "groupIdentity": 2}
    slo = slo_with(None, lsrClass=on, lsClass=on, beClass={"enable": True, "groupIdentity": -1})
    rule = Rule(slo=slo)
    hook = GroupIdentity()
    assert ask_pod(hook, make_pod("be"), rule) == Resources(bvt_warp_ns=-1)
    assert ask_pod(hook, make_pod("lsr", api.QOSClass.LSR), rule) == Resources(bvt_warp_ns=2)
    assert ask_pod(hook, make_pod("plain", kube_qos=api.KubeQOSClass.BESTEFFORT), rule) == Resources(
        bvt_warp_ns=-1
    )
    assert hook.kube_qos(api.KubeQOSClass.GUARANTEED, rule) == Resources(bvt_warp_ns=0)
    assert hook.kube_qos(api.KubeQOSClass.BESTEFFORT, rule) == Resources(bvt_warp_ns=-1)
    # disabled classes and another CPU policy reset to 0; a kernel without the file gets nothing
    off = Rule(slo=slo_with("coreSched", beClass={"enable": True, "groupIdentity": -1}))
    assert ask_pod(hook, make_pod("be"), off) == Resources(bvt_warp_ns=0)
    assert not groupidentity.enabled(off.slo) and groupidentity.enabled(slo)
    assert ask_pod(hook, make_pod("be"), Rule(slo=slo, group_identity=False)).empty


def test_oom_score_adj_annotations() -> None:
    hook = OOMScoreAdj()
    pod = make_pod(
        "p",
        containers=2,
        annotations={
            "koordinator.sh/oom-score-adj": "-100",
            "koordinator.sh/oom-score-adj-spec": '{"c1": 500}',
        },
    )
    assert ask_container(hook, pod) == Resources(oom_score_adj=-100)
    assert ask_container(hook, pod, i=1) == Resources(oom_score_adj=500)
    assert ask_container(hook, make_pod("x", annotations={"koordinator.sh/oom-score-adj": "2000"})).empty
    assert ask_container(hook, make_pod("y")).empty
    sandbox = ContainerRequest(pod, api.QOSClass.BE, pod.containers[0], sandbox=True)
    assert hook.container(sandbox, Rule()).empty


def test_core_sched_groups() -> None:
    slo = slo_with("coreSched", lsClass={"enable": True}, beClass={"enable": True, "coreExpeller": True})
    ls = make_pod("ls", api.QOSClass.LS, labels={"koordinator.sh/core-sched-group-id": "web"})
    assert coresched.group_of(slo, ls, api.QOSClass.LS) == "web"
    assert coresched.group_of(slo, make_pod("be"), api.QOSClass.BE) == "-expeller"
    mine = make_pod("x", api.QOSClass.LS, labels={"koordinator.sh/core-sched-policy": "exclusive"})
    assert coresched.group_of(slo, mine, api.QOSClass.LS) == mine.uid
    none = make_pod("n", api.QOSClass.LS, labels={"koordinator.sh/core-sched-policy": "none"})
    assert coresched.group_of(slo, none, api.QOSClass.LS) is None
    assert coresched.group_of(slo, make_pod("r", api.QOSClass.LSR), api.QOSClass.LSR) is None  # not enabled
    assert coresched.group_of(slo_with(None, lsClass={"enable": True}), ls, api.QOSClass.LS) is None
    hook = coresched.CoreSched()
    assert ask_container(hook, ls, Rule(slo=slo)) == Resources(core_sched_group="web")
    assert ask_container(hook, ls, Rule(slo=slo, core_sched=False)).empty
