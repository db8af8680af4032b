"""Generate the CRDs: NodeMetric and NodeSLO (``slo.koordinator.sh/v1alpha1``), NRT (``nrt_schema.py``).

The YAML files next to this script are its output; edit the schema here and run
``python deploy/daemonset/crds/gen_crds.py`` (``--check`` exits 1 when a file is out of date, as the unit
tests do). Shapes follow Koordinator's ``apis/slo/v1alpha1`` types: cluster-scoped, one object per node
(name = node name), ``status`` subresource. Constraints (ranges, enums, required fields) are exactly
Koordinator's CRDs' and no stricter, so every object a Koordinator cluster holds is accepted here
(``tests/unit/deploy/test_crd_compat.py`` checks it against ``tests/koord_slo_facts.py``, a table of
the constraints of Koordinator's v1.8 and main-branch CRDs); values a type allows but the agent cannot
use are refused by the agent's NodeSLO validation, which keeps the last good spec, as koordlet does.
Valid values are named in descriptions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nrt_schema
import yaml
from schema_parts import (
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
    condition = obj(
        {
            "type": string(),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "observedGeneration": integer(minimum=0),
            "lastTransitionTime": string(format="date-time"),
            "reason": string(),
            "message": string(),
        },
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )
    return obj(
        {
            "type": string("Device type: gpu, rdma, fpga, ..."),
            "id": string("The device's UID."),
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
                },
                required=["nodeID", "pcieID", "socketID"],
            ),
            "vfGroups": array(
                obj(
                    {
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "vfs": array(obj({"minor": integer("int32"), "busID": string()}, required=["minor"])),
                    }
                )
            ),
            "conditions": array(condition),
        },
        "One device's usage; Koordinator's DeviceInfo.",
        required=["health"],
    )


def resource_map(description: str | None = None) -> Schema:
    return obj({"resources": resource_list(), "devices": array(device_info())}, description)


def aggregated_usages(description: str) -> Schema:
    usage = {
        "type": "object",
        "description": "Usage per aggregation type (avg, p50, p90, p95, p99) over the duration.",
        "additionalProperties": resource_map(),
    }
    item = obj({"duration": string("Window length, Go duration syntax (5m0s)."), "usage": usage})
    return array(item, description)


def nodemetric_schema() -> Schema:
    collect_policy = obj(
        {
            "aggregateDurationSeconds": integer(description="Aggregation window of the report."),
            "reportIntervalSeconds": integer(description="How often koordlet updates the status."),
            "nodeAggregatePolicy": obj(
                {"durations": array(string("Go duration (5m0s)."), "Windows of aggregatedNodeUsages.")}
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
        {"numaNodeID": integer("int32"), "nodeUsage": resource_map(), "systemUsage": resource_map()}
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
    p, n = percent, integer
    return obj(
        {
            "enable": boolean("Master switch of BE suppression and eviction."),
            "cpuSuppressThresholdPercent": p("BE CPU budget, % of node capacity."),
            "cpuSuppressMinPercent": p("Floor of the BE CPU budget, % of node capacity."),
            "cpuSuppressPolicy": string("cpuset or cfsQuota."),
            "memoryEvictThresholdPercent": p("Node memory usage % that starts BE eviction."),
            "memoryEvictLowerPercent": p("Memory usage % eviction releases down to."),
            "memoryAllocatableEvictThresholdPercent": n(minimum=0),
            "memoryAllocatableEvictLowerPercent": n(minimum=0),
            "cpuEvictBESatisfactionLowerPercent": n(description="(0, 60]"),
            "cpuEvictBESatisfactionUpperPercent": n(description="[lower, 100)"),
            "cpuEvictBEUsageThresholdPercent": n(description="BE usage/limit %; 90 when unset."),
            "cpuEvictTimeWindowSeconds": n(),
            "cpuEvictThresholdPercent": p(),
            "cpuEvictLowerPercent": p(),
            "cpuAllocatableEvictThresholdPercent": n(minimum=0),
            "cpuAllocatableEvictLowerPercent": n(minimum=0),
            "cpuEvictPolicy": string("evictByRealLimit or evictByAllocatable."),
            "evictEnabledPriorityThreshold": n("int32", description="Highest evictable priority value."),
            "allocatableEvictPriorityThreshold": n("int32"),
        },
        "Thresholds for BE suppression and eviction.",
    )


def resource_qos() -> Schema:
    cpu = obj(
        {
            "enable": boolean(),
            "groupIdentity": integer(description="cpu.bvt_warp_ns, -1..2."),
            "schedIdle": integer(description="cpu.idle, 0 or 1."),
            "coreExpeller": boolean(),
        }
    )
    memory = obj(
        {
            "enable": boolean(),
            "minLimitPercent": integer(minimum=0, description="memory.min as % of the request."),
            "lowLimitPercent": integer(minimum=0, description="memory.low as % of the request."),
            "throttlingPercent": integer(minimum=0, description="memory.high as % of the limit."),
            "wmarkRatio": percent("memory.wmark_ratio."),
            "wmarkScalePermill": integer(minimum=1, maximum=1000, description="memory.wmark_scale_factor."),
            "wmarkMinAdj": integer(minimum=-25, maximum=50, description="memory.wmark_min_adj."),
            "priorityEnable": integer(description="0 or 1."),
            "priority": integer(description="0..12."),
            "oomKillGroup": integer(description="0 or 1."),
            "pageCacheEnable": boolean(),
            "pageCacheLimitPercent": integer(),
            "pageCacheLimitSize": integer(),
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
            "readLatency": integer(),
            "writeLatency": integer(),
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
    block = obj({"name": string(), "type": string("device, volumegroup or podvolume."), "ioCfg": io_cfg})
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
                    "cpuPolicy": string("groupIdentity or coreSched."),
                    "netQOSPolicy": string("tc or terway-qos."),
                }
            ),
            **{k: resource_qos() for k in ("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot")},
        },
        "QoS settings per QoS class.",
    )
    burst = obj(
        {
            "policy": string("none, cpuBurstOnly, cfsQuotaBurstOnly or auto."),
            "cpuBurstPercent": integer(
                minimum=0, maximum=10000, description="cpu.cfs_burst_us as % of the limit."
            ),
            "cfsQuotaBurstPercent": integer(description="Max raised cfs quota, % of the limit."),
            "cfsQuotaBurstPeriodSeconds": integer(description="-1 = unlimited."),
            "sharePoolThresholdPercent": integer(description="Share-pool usage % above which burst stops."),
        },
        "CPU burst strategy.",
    )
    system = obj(
        {
            "minFreeKbytesFactor": integer(),
            "watermarkScaleFactor": integer(),
            "memcgReapBackGround": integer(description="0 or 1."),
            "schedGroupIdentityEnabled": integer(description="0 or 1."),
            "schedIdleSaverWmark": integer(),
            "schedFeatures": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "pageCacheLimitEnabled": integer(description="0 or 1: /sys/kernel/mm/pagecache_limit/enabled."),
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
                    "base": string("CgroupRoot, Kubepods, KubepodsBurstable or KubepodsBesteffort."),
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
        f"{nrt_schema.GROUP}_noderesourcetopologies.yaml": nrt_schema.nrt_crd(),
    }
    return {
        name: header + "---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110)
        for name, doc in docs.items()
    }


def main(argv: list[str]) -> int:
    stale = []
    for name, text in rendered().items():
        path = HERE / name
        if "--check" not in argv:
            path.write_text(text, encoding="utf-8")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    print("".join(f"{name} is out of date: run gen_crds.py\n" for name in stale), end="")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
