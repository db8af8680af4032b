"""Generate the NodeMetric and NodeSLO CustomResourceDefinitions (``slo.koordinator.sh/v1alpha1``).

The YAML files next to this script are its output; edit the schema here and run
``python deploy/daemonset/crds/gen_crds.py`` (``--check`` exits 1 when a file is out of date, as the unit
tests do). Shapes follow Koordinator's ``apis/slo/v1alpha1`` types: cluster-scoped, one object per node
(name = node name), ``status`` subresource. Integer ranges are set only where Koordinator documents them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from schema_parts import (
    DURATION_PATTERN,
    Schema,
    array,
    boolean,
    free_object,
    int_or_string,
    integer,
    obj,
    percent,
    quantity,
    string,
)

GROUP = "slo.koordinator.sh"
VERSION = "v1alpha1"
HERE = Path(__file__).resolve().parent


# ---- NodeMetric ---------------------------------------------------------------------------------------


def resource_list(description: str = "Resource name (cpu, memory, ...) to quantity.") -> Schema:
    return {"type": "object", "description": description, "additionalProperties": quantity()}


def device_info() -> Schema:
    return obj(
        {
            "type": string("Device type: gpu, rdma, fpga, ..."),
            "uuid": string(),
            "minor": integer("int32"),
            "moduleID": integer("int32"),
            "health": boolean(),
            "resources": resource_list(),
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "topology": obj(
                {
                    "socketID": integer("int32"),
                    "nodeID": integer("int32"),
                    "pcieID": string(),
                    "busID": string(),
                }
            ),
        },
        "One device's usage; Koordinator's DeviceInfo (fields not listed here are kept).",
        **{"x-kubernetes-preserve-unknown-fields": True},
    )


def resource_map(description: str | None = None) -> Schema:
    return obj({"resources": resource_list(), "devices": array(device_info())}, description)


def aggregated_usages(description: str) -> Schema:
    usage = obj(
        {name: resource_map() for name in ("avg", "p50", "p90", "p95", "p99")},
        "Usage per aggregation type over the duration.",
    )
    item = obj(
        {
            "duration": string("Window length, Go duration syntax (5m0s).", pattern=DURATION_PATTERN),
            "usage": usage,
        }
    )
    return array(item, description)


def nodemetric_schema() -> Schema:
    collect_policy = obj(
        {
            "aggregateDurationSeconds": integer(minimum=0, description="Aggregation window of the report."),
            "reportIntervalSeconds": integer(minimum=0, description="How often koordlet updates the status."),
            "nodeAggregatePolicy": obj(
                {"durations": array(string(pattern=DURATION_PATTERN), "Windows of aggregatedNodeUsages.")}
            ),
            "nodeMemoryCollectPolicy": string(
                "Which memory usage is reported for the node.",
                enum=["usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"],
            ),
        }
    )
    pod_metric = obj(
        {
            "name": string(),
            "namespace": string(),
            "podUsage": resource_map(),
            "priority": string("Koordinator priority class: koord-prod, koord-mid, koord-batch, koord-free."),
            "qos": string("Koordinator QoS class: LSE, LSR, LS, BE, SYSTEM."),
            "extensions": free_object("Extension fields."),
        }
    )
    host_app = obj({"name": string(), "usage": resource_map(), "priority": string(), "qos": string()})
    numa_usage = obj(
        {"numaNodeID": integer("int32", 0), "nodeUsage": resource_map(), "systemUsage": resource_map()}
    )
    status = obj(
        {
            "updateTime": string("When koordlet last wrote this status.", format="date-time"),
            "nodeMetric": obj(
                {
                    "nodeUsage": resource_map("Current usage of the whole node."),
                    "aggregatedNodeUsages": aggregated_usages("Node usage aggregated over windows."),
                    "systemUsage": resource_map("Usage of system (non-pod) processes."),
                    "aggregatedSystemUsages": aggregated_usages("System usage aggregated over windows."),
                    "numaUsages": array(numa_usage, "Per-NUMA-node usage."),
                }
            ),
            "podsMetric": array(pod_metric, "Usage of each pod on the node."),
            "hostApplicationMetric": array(host_app, "Usage of host applications declared in NodeSLO."),
            "prodReclaimableMetric": obj({"resource": resource_map()}, "Reclaimable resources of prod pods."),
            "prodPeakMetric": obj({"resource": resource_map()}, "Predicted peak usage of prod pods."),
            "extensions": free_object("Extension fields."),
        },
        "Usage reported by koordlet.",
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": obj({"metricCollectPolicy": collect_policy}, "Collection policy, set by slo-controller."),
            "status": status,
        },
        "NodeMetric: the resource usage of one node, reported by its koordlet.",
    )


# ---- NodeSLO ------------------------------------------------------------------------------------------


def threshold_strategy() -> Schema:
    p = percent
    return obj(
        {
            "enable": boolean("Master switch of BE suppression and eviction."),
            "cpuSuppressThresholdPercent": p("BE CPU budget, % of node capacity."),
            "cpuSuppressMinPercent": p("Floor of the BE CPU budget, % of node capacity."),
            "cpuSuppressPolicy": string(enum=["cpuset", "cfsQuota"]),
            "memoryEvictThresholdPercent": p("Node memory usage % that starts BE eviction."),
            "memoryEvictLowerPercent": p("Memory usage % eviction releases down to."),
            "memoryAllocatableEvictThresholdPercent": p(maximum=None),
            "memoryAllocatableEvictLowerPercent": p(maximum=None),
            "cpuEvictBESatisfactionLowerPercent": p(),
            "cpuEvictBESatisfactionUpperPercent": p(),
            "cpuEvictBEUsageThresholdPercent": p(),
            "cpuEvictTimeWindowSeconds": integer(minimum=0),
            "cpuEvictThresholdPercent": p(),
            "cpuEvictLowerPercent": p(),
            "cpuAllocatableEvictThresholdPercent": p(maximum=None),
            "cpuAllocatableEvictLowerPercent": p(maximum=None),
            "cpuEvictPolicy": string(enum=["evictByRealLimit", "evictByAllocatable"]),
            "evictEnabledPriorityThreshold": integer(
                "int32", description="Highest evictable priority value."
            ),
            "allocatableEvictPriorityThreshold": integer("int32"),
        },
        "Thresholds for BE suppression and eviction.",
    )


def resource_qos() -> Schema:
    cpu = obj(
        {
            "enable": boolean(),
            "groupIdentity": integer(minimum=-1, maximum=2, description="cpu.bvt_warp_ns."),
            "schedIdle": integer(minimum=0, maximum=1, description="cpu.idle."),
            "coreExpeller": boolean(),
        }
    )
    memory = obj(
        {
            "enable": boolean(),
            "minLimitPercent": percent("memory.min as % of the request."),
            "lowLimitPercent": percent("memory.low as % of the request."),
            "throttlingPercent": percent("memory.high as % of the limit."),
            "wmarkRatio": percent("memory.wmark_ratio."),
            "wmarkScalePermill": integer(minimum=1, maximum=1000, description="memory.wmark_scale_factor."),
            "wmarkMinAdj": integer(minimum=-25, maximum=50, description="memory.wmark_min_adj."),
            "priorityEnable": integer(minimum=0, maximum=1),
            "priority": integer(minimum=0, maximum=12),
            "oomKillGroup": integer(minimum=0, maximum=1),
            "pageCacheEnable": boolean(),
            "pageCacheLimitPercent": percent(),
            "pageCacheLimitSize": integer(minimum=0),
            "pageCacheReclaimSync": boolean(),
        }
    )
    resctrl = obj(
        {
            "enable": boolean(),
            "catRangeStartPercent": percent("Start of the L3 ways, %."),
            "catRangeEndPercent": percent("End of the L3 ways, %."),
            "mbaPercent": percent("Memory bandwidth, %."),
        }
    )
    io_cfg = obj(
        {
            **{k: integer(minimum=0) for k in ("readIOPS", "writeIOPS", "readBPS", "writeBPS")},
            "ioWeightPercent": integer(minimum=1, maximum=100),
            "readLatency": integer(minimum=0),
            "writeLatency": integer(minimum=0),
            "readLatencyPercent": percent(),
            "writeLatencyPercent": percent(),
            "enableUserModel": boolean(),
            **{
                k: integer(minimum=0)
                for k in (
                    "modelReadBPS",
                    "modelWriteBPS",
                    "modelReadSeqIOPS",
                    "modelWriteSeqIOPS",
                    "modelReadRandIOPS",
                    "modelWriteRandIOPS",
                )
            },
        }
    )
    block = obj(
        {"name": string(), "type": string(enum=["device", "volumegroup", "podvolume"]), "ioCfg": io_cfg}
    )
    blkio = obj({"enable": boolean(), "blocks": array(block)})
    network = obj(
        {
            "enable": boolean(),
            **{
                k: int_or_string("Bandwidth: a quantity or a percentage of the node's.")
                for k in ("ingressRequest", "ingressLimit", "egressRequest", "egressLimit")
            },
        }
    )
    return obj(
        {"cpuQOS": cpu, "memoryQOS": memory, "blkioQOS": blkio, "resctrlQOS": resctrl, "networkQOS": network}
    )


def nodeslo_schema() -> Schema:
    qos_strategy = obj(
        {
            "policies": obj(
                {
                    "cpuPolicy": string(enum=["groupIdentity", "coreSched"]),
                    "netQOSPolicy": string(enum=["tc", "terway-qos"]),
                }
            ),
            **{k: resource_qos() for k in ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")},
        },
        "QoS settings per QoS class.",
    )
    burst = obj(
        {
            "policy": string(enum=["none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"]),
            "cpuBurstPercent": integer(minimum=0, description="cpu.cfs_burst_us as % of the limit."),
            "cfsQuotaBurstPercent": integer(minimum=0, description="Max raised cfs quota, % of the limit."),
            "cfsQuotaBurstPeriodSeconds": integer(minimum=-1, description="-1 = unlimited."),
            "sharePoolThresholdPercent": percent("Share-pool usage % above which burst is withdrawn."),
        },
        "CPU burst strategy.",
    )
    system = obj(
        {
            "minFreeKbytesFactor": integer(minimum=0),
            "watermarkScaleFactor": integer(minimum=0),
            "memcgReapBackGround": integer(minimum=0, maximum=1),
            "schedGroupIdentityEnabled": integer(minimum=0, maximum=1),
            "schedIdleSaverWmark": integer(minimum=0),
            "schedFeatures": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "pageCacheLimitEnabled": boolean(),
            "totalNetworkBandwidth": quantity("Node network bandwidth."),
        },
        "Node-level kernel settings.",
    )
    host_app = obj(
        {
            "name": string(),
            "priority": string(),
            "qos": string(),
            "cgroupPath": obj(
                {
                    "base": string(
                        enum=["CgroupRoot", "Kubepods", "KubepodsBurstable", "KubepodsBesteffort"]
                    ),
                    "parentDir": string(),
                    "relativePath": string(),
                }
            ),
            "strategy": free_object("Per-application strategy."),
        }
    )
    spec = obj(
        {
            "resourceUsedThresholdWithBE": threshold_strategy(),
            "resourceQOSStrategy": qos_strategy,
            "cpuBurstStrategy": burst,
            "systemStrategy": system,
            "extensions": free_object("Extension fields."),
            "hostApplications": array(host_app, "Applications outside Kubernetes managed by QoS."),
        },
        "Node SLO settings, produced by slo-controller.",
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": {"type": "object", "description": "Unused."},
        },
        "NodeSLO: the QoS settings koordlet enforces on one node.",
    )


def crd(kind: str, plural: str, short: list[str], schema: Schema) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def rendered() -> dict[str, str]:
    header = "# Generated by gen_crds.py in this directory; edit that script, not this file.\n"
    docs = {
        f"{GROUP}_nodemetrics.yaml": crd("NodeMetric", "nodemetrics", ["nm"], nodemetric_schema()),
        f"{GROUP}_nodeslos.yaml": crd("NodeSLO", "nodeslos", ["nslo"], nodeslo_schema()),
    }
    return {
        name: header + "---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110)
        for name, doc in docs.items()
    }


def main(argv: list[str]) -> int:
    stale = []
    for name, text in rendered().items():
        path = HERE / name
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    for name in stale:
        print(f"{name} is out of date: run gen_crds.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
