"""What koord-manager and the agent write to the API server, at its fullest, built by their own code for the
real-apiserver round trips of ``test_deploy``: the slo-controller-config strategies from which koord-manager
renders a NodeSLO and a NodeMetric spec with every field, and the agent's NodeResourceTopology reporter on
a host with every kind of CPU and memory fact."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from koordlet import api
from koordlet.statesinformer.noderesourcetopology import NodeTopologyInformer, TopologyOptions, TopologySink
from koordlet.system.cgroups import CgroupMode
from koordlet.system.host import Host
from koordlet.system.podpath import CgroupDriver
from koordlet.testing import make_node, make_pod, pod_uid
from koordlet.testing.sysfs import write_topology
from koordshared.apis.configuration.slocontroller import HOST_APPLICATION_CONFIG_KEY, STRATEGY_KEYS
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.testing.topology import TWO_SOCKETS, GiB

Obj = dict[str, Any]

# ---- NodeSLO and NodeMetric specs: slo-controller-config strategies for one node ----------------------


def _io_config() -> dict[str, Any]:
    numbers = ("readIOPS", "writeIOPS", "readBPS", "writeBPS", "readLatency", "writeLatency")
    model = ("modelReadBPS", "modelWriteBPS", "modelReadSeqIOPS", "modelWriteSeqIOPS")
    return {
        **{k: 1000 + i for i, k in enumerate(numbers)},
        **{k: 2000 + i for i, k in enumerate((*model, "modelReadRandIOPS", "modelWriteRandIOPS"))},
        "ioWeightPercent": 60,
        "readLatencyPercent": 95,
        "writeLatencyPercent": 90,
        "enableUserModel": True,
    }


def _qos_class(group_identity: int, wmark_min_adj: int) -> dict[str, Any]:
    """One QoS class with every strategy and every field set (values within the agent's ranges)."""
    return {
        "cpuQOS": {"enable": True, "groupIdentity": group_identity, "schedIdle": 1, "coreExpeller": True},
        "memoryQOS": {
            "enable": True,
            "minLimitPercent": 10,
            "lowLimitPercent": 20,
            "throttlingPercent": 80,
            "wmarkRatio": 95,
            "wmarkScalePermill": 20,
            "wmarkMinAdj": wmark_min_adj,
            "priorityEnable": 1,
            "priority": 6,
            "oomKillGroup": 1,
            "pageCacheEnable": True,
            "pageCacheLimitPercent": 80,
            "pageCacheLimitSize": 1 << 30,
            "pageCacheReclaimSync": True,
        },
        "blkioQOS": {
            "enable": True,
            "blocks": [
                {"name": "/dev/vdb", "type": "device", "ioCfg": _io_config()},
                {"name": "vg0", "type": "volumegroup", "ioCfg": {"ioWeightPercent": 50}},
            ],
        },
        "resctrlQOS": {
            "enable": True,
            "catRangeStartPercent": 10,
            "catRangeEndPercent": 90,
            "mbaPercent": 80,
        },
        "networkQOS": {
            "enable": True,
            "ingressRequest": "50M",
            "ingressLimit": 80,
            "egressRequest": "10%",
            "egressLimit": "1G",
        },
    }


FULL_STRATEGIES: dict[str, dict[str, Any]] = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressMinPercent": 20,
        "cpuSuppressPolicy": "cfsQuota",
        "memoryEvictThresholdPercent": 70,
        "memoryEvictLowerPercent": 65,
        "memoryAllocatableEvictThresholdPercent": 110,
        "memoryAllocatableEvictLowerPercent": 100,
        "cpuEvictBESatisfactionLowerPercent": 40,
        "cpuEvictBESatisfactionUpperPercent": 80,
        "cpuEvictBEUsageThresholdPercent": 90,
        "cpuEvictTimeWindowSeconds": 300,
        "cpuEvictThresholdPercent": 80,
        "cpuEvictLowerPercent": 70,
        "cpuAllocatableEvictThresholdPercent": 110,
        "cpuAllocatableEvictLowerPercent": 100,
        "cpuEvictPolicy": "evictByAllocatable",
        "evictEnabledPriorityThreshold": 5999,
        "allocatableEvictPriorityThreshold": 5999,
    },
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "coreSched", "netQOSPolicy": "terway-qos"},
        "lsrClass": _qos_class(2, -25),
        "lsClass": _qos_class(2, -25),
        "beClass": _qos_class(-1, 50),
        "systemClass": _qos_class(0, 0),
        "cgroupRoot": _qos_class(0, 0),
    },
    "cpuBurstStrategy": {
        "policy": "auto",
        "cpuBurstPercent": 800,
        "cfsQuotaBurstPercent": 250,
        "cfsQuotaBurstPeriodSeconds": 60,
        "sharePoolThresholdPercent": 40,
    },
    "systemStrategy": {
        "minFreeKbytesFactor": 100,
        "watermarkScaleFactor": 150,
        "memcgReapBackGround": 1,
        "schedGroupIdentityEnabled": 1,
        "schedIdleSaverWmark": 5,
        "schedFeatures": {"ID_ABSOLUTE_EXPEL": True, "ID_LOAD_BALANCE": False},
        "pageCacheLimitEnabled": 1,
        "totalNetworkBandwidth": "10G",
    },
}
HOST_APPLICATIONS = [
    {
        "name": "nginx",
        "priority": "koord-prod",
        "qos": "LS",
        "cgroupPath": {
            "base": "KubepodsBurstable",
            "parentDir": "host-latency-sensitive",
            "relativePath": "nginx",
        },
    },
    {"name": "logagent", "priority": "koord-batch", "qos": "BE", "cgroupPath": {"base": "CgroupRoot"}},
]
FULL_COLLECT_POLICY = {
    "cpuReclaimThresholdPercent": 70,
    "memoryReclaimThresholdPercent": 80,
    "metricReportIntervalSeconds": 30,
    "metricAggregateDurationSeconds": 120,
    "metricAggregatePolicy": {"durations": ["5m", "10m", "30m"]},
    "metricMemoryCollectPolicy": "usageWithPageCache",
}


def slo_keys_for_node(data: Mapping[str, str], selector: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ConfigMap's keys (as ``slo_config`` takes them) with a first node strategy, for the nodes
    ``selector`` matches, that sets every field: other nodes render as before."""
    out: dict[str, dict[str, Any]] = {}
    for key, section in STRATEGY_KEYS.items():
        doc = json.loads(data.get(key) or "{}")
        entry = {"name": "every-field", "nodeSelector": dict(selector), **FULL_STRATEGIES[section]}
        out[key] = {**doc, "nodeStrategies": [entry, *doc.get("nodeStrategies", [])]}
    apps = json.loads(data.get(HOST_APPLICATION_CONFIG_KEY) or "{}")
    entry = {"name": "every-field", "nodeSelector": dict(selector), "applications": HOST_APPLICATIONS}
    out[HOST_APPLICATION_CONFIG_KEY] = {**apps, "nodeConfigs": [entry, *apps.get("nodeConfigs", [])]}
    colocation = json.loads(data.get("colocation-config") or "{}")
    entry = {"name": "every-field", "nodeSelector": dict(selector), **FULL_COLLECT_POLICY}
    out["colocation-config"] = {**colocation, "nodeConfigs": [entry, *colocation.get("nodeConfigs", [])]}
    return out


# ---- NodeResourceTopology: the agent's reporter on a host with every fact --------------------------------


def topology_reporter(
    root: Path, node_name: str, node_uid: str, sink: TopologySink, current: Callable[[], Obj | None]
) -> tuple[NodeTopologyInformer, list[api.PodInfo]]:
    """The agent's NodeResourceTopology informer for ``node_name`` on a simulated two-socket host with huge
    pages, the kubelet's static CPU manager (options, reserved CPUs, a checkpoint with exclusive CPUs),
    node reservations, system-QoS CPUs and NUMA reservation on; its pods are the returned list (change it
    between syncs)."""
    topo = dataclasses.replace(TWO_SOCKETS, hugepages_2m_per_numa=512, hugepages_1g_per_numa=2)
    paths = write_topology(root, topo)
    checkpoint = {
        "policyName": "static",
        "defaultCpuSet": "0-5,8-13",
        "entries": {pod_uid(7): {"main": "6-7,14"}, pod_uid(8): {"main": "13"}},
    }
    paths.kubelet_cpu_manager_state().write_text(json.dumps(checkpoint))
    node = make_node(
        16000,
        64 * GiB,
        cpu_allocatable_milli=15000,
        memory_allocatable_bytes=60 * GiB,
        labels={nrt.LABEL_ENABLE_NUMA_RESERVATION: "true"},
        annotations={
            nrt.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"15"}',
            nrt.ANNOTATION_SYSTEM_QOS_RESOURCE: '{"cpuset":"5"}',
        },
    )
    configz = {
        "kubeletconfig": {
            "cpuManagerPolicy": "static",
            "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "kubeReserved": {"cpu": "1"},
            "systemReserved": {"cpu": "500m"},
            "topologyManagerPolicy": "single-numa-node",
            "topologyManagerScope": "pod",
        }
    }
    pods = [
        make_pod("web", kube_qos=api.KubeQOSClass.GUARANTEED, uid=pod_uid(7)),
        make_pod("ls", api.QOSClass.LS, uid=pod_uid(8)),
    ]
    informer = NodeTopologyInformer(
        TopologyOptions(node_name, hugepage_report=True),
        Host(paths, mode=CgroupMode.V1, driver=CgroupDriver.CGROUPFS),
        lambda: node,
        lambda: tuple(pods),
        configz=lambda: configz,
        cached_object=current,
        node_uid=lambda: node_uid,
        sink=sink,
    )
    return informer, pods
