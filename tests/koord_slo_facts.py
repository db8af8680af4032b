"""What Koordinator's NodeSLO and NodeMetric CRDs allow, as a table our CRDs are tested against (test helper).

The facts were read (not copied) from Koordinator's repository: ``config/crd/bases/`` files
``slo.koordinator.sh_nodeslos.yaml`` and ``slo.koordinator.sh_nodemetrics.yaml`` at tag ``v1.8.0`` and at
main (commit a7a1b76b), and the Go types they are generated from in ``apis/slo/v1alpha1/``
(``nodeslo_types.go``, ``nodemetric_types.go``, ``host_application.go``). Only interface facts are kept:
field names, JSON types, integer widths and ranges, enums, required fields and string length limits; fields
main has and v1.8.0 lacks are marked :data:`MAIN`. Where Koordinator sets no constraint (most strings,
durations, policy names) the table sets none either, and so must our CRDs.

``tests/koord_slo_edges.py`` turns the table into Koordinator's schema of either version and generates
objects at its edges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

V18 = "v1.8.0"
MAIN = "main"
VERSIONS = (V18, MAIN)


@dataclass(frozen=True)
class Leaf:
    """A scalar: ``kind`` is int, bool, str, time (RFC 3339), quantity or int-or-str (no pattern)."""

    kind: str
    lo: int | None = None
    hi: int | None = None
    bits: int = 64
    enum: tuple[str, ...] = ()
    length: tuple[int, int] | None = None  # min and max length of a string
    examples: tuple[str, ...] = ()  # values of a string with a syntax of its own (condition reason/type)
    since: str = V18


@dataclass(frozen=True)
class Obj:
    """An object with known fields; ``fields`` empty means an object Koordinator prunes to ``{}``."""

    fields: Mapping[str, Node] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    since: str = V18


@dataclass(frozen=True)
class Arr:
    item: Node
    since: str = V18


@dataclass(frozen=True)
class Map:
    """An object with free keys, all values ``value``."""

    value: Node
    since: str = V18


@dataclass(frozen=True)
class Free:
    """An object whose unknown fields are kept (``x-kubernetes-preserve-unknown-fields``)."""

    since: str = V18


Node = Leaf | Obj | Arr | Map | Free


def i64(lo: int | None = None, hi: int | None = None) -> Leaf:
    return Leaf("int", lo, hi)


def i32() -> Leaf:
    return Leaf("int", bits=32)


PCT = i64(0, 100)
BOOL = Leaf("bool")
STR = Leaf("str")
QTY = Leaf("quantity")


def main(node: Node) -> Node:
    """``node`` exists on Koordinator's main branch only."""
    return dataclasses.replace(node, since=MAIN)


# ---- NodeMetric ---------------------------------------------------------------------------------------

CONDITION = Obj(
    {
        "type": Leaf("str", length=(1, 316), examples=("Healthy", "example.com/link-up")),
        "status": Leaf("str", enum=("True", "False", "Unknown")),
        "observedGeneration": i64(0),
        "lastTransitionTime": Leaf("time"),
        "reason": Leaf("str", length=(1, 1024), examples=("DriverReady", "Xid_79")),
        "message": Leaf("str", length=(0, 32768)),
    },
    required=("lastTransitionTime", "message", "reason", "status", "type"),
)
DEVICE = Obj(
    {
        "type": STR,
        "id": STR,
        "minor": i32(),
        "moduleID": i32(),
        "health": BOOL,
        "resources": Map(QTY),
        "labels": Map(STR),
        "topology": Obj(
            {"socketID": i32(), "nodeID": i32(), "pcieID": STR, "busID": STR},
            required=("nodeID", "pcieID", "socketID"),
        ),
        "vfGroups": Arr(
            Obj({"labels": Map(STR), "vfs": Arr(Obj({"minor": i32(), "busID": STR}, required=("minor",)))})
        ),
        "conditions": Arr(CONDITION),
    },
    required=("health",),
)
RESOURCE_MAP = Obj({"resources": Map(QTY), "devices": Arr(DEVICE)})
AGGREGATED = Arr(Obj({"duration": STR, "usage": Map(RESOURCE_MAP)}))

NODEMETRIC_SPEC = Obj(
    {
        "metricCollectPolicy": Obj(
            {
                "aggregateDurationSeconds": i64(),
                "reportIntervalSeconds": i64(),
                "nodeAggregatePolicy": Obj({"durations": Arr(STR)}),
                "nodeMemoryCollectPolicy": Leaf(
                    "str", enum=("usageWithHotPageCache", "usageWithoutPageCache", "usageWithPageCache")
                ),
            }
        )
    }
)
NODEMETRIC_STATUS = Obj(
    {
        "updateTime": Leaf("time"),
        "nodeMetric": Obj(
            {
                "nodeUsage": RESOURCE_MAP,
                "aggregatedNodeUsages": AGGREGATED,
                "systemUsage": RESOURCE_MAP,
                "aggregatedSystemUsages": AGGREGATED,
                "numaUsages": main(
                    Arr(
                        Obj(
                            {"numaNodeID": i32(), "nodeUsage": RESOURCE_MAP, "systemUsage": RESOURCE_MAP},
                            required=("numaNodeID",),
                        )
                    )
                ),
            }
        ),
        "podsMetric": Arr(
            Obj(
                {
                    "name": STR,
                    "namespace": STR,
                    "podUsage": RESOURCE_MAP,
                    "priority": STR,
                    "qos": STR,
                    "extensions": Free(),
                }
            )
        ),
        "hostApplicationMetric": Arr(Obj({"name": STR, "usage": RESOURCE_MAP, "priority": STR, "qos": STR})),
        "prodReclaimableMetric": Obj({"resource": RESOURCE_MAP}),
        "prodPeakMetric": main(Obj({"resource": RESOURCE_MAP})),
    }
)

# ---- NodeSLO ------------------------------------------------------------------------------------------

THRESHOLDS = Obj(
    {
        "enable": BOOL,
        **dict.fromkeys(("cpuSuppressThresholdPercent", "cpuSuppressMinPercent"), PCT),
        **dict.fromkeys(("memoryEvictThresholdPercent", "memoryEvictLowerPercent"), PCT),
        **dict.fromkeys(("cpuEvictThresholdPercent", "cpuEvictLowerPercent"), PCT),
        **dict.fromkeys(
            ("memoryAllocatableEvictThresholdPercent", "memoryAllocatableEvictLowerPercent"), i64(0)
        ),
        **dict.fromkeys(("cpuAllocatableEvictThresholdPercent", "cpuAllocatableEvictLowerPercent"), i64(0)),
        **dict.fromkeys(("cpuEvictBESatisfactionLowerPercent", "cpuEvictBESatisfactionUpperPercent"), i64()),
        **dict.fromkeys(("cpuEvictBEUsageThresholdPercent", "cpuEvictTimeWindowSeconds"), i64()),
        **dict.fromkeys(("cpuSuppressPolicy", "cpuEvictPolicy"), STR),
        **dict.fromkeys(("evictEnabledPriorityThreshold", "allocatableEvictPriorityThreshold"), i32()),
    }
)
IO_CFG = Obj(
    {
        **dict.fromkeys(("readIOPS", "writeIOPS", "readBPS", "writeBPS"), i64(0)),
        "ioWeightPercent": i64(1, 100),
        **dict.fromkeys(("readLatency", "writeLatency"), i64()),
        **dict.fromkeys(("readLatencyPercent", "writeLatencyPercent"), PCT),
        "enableUserModel": BOOL,
        **dict.fromkeys(("modelReadBPS", "modelWriteBPS"), i64(1)),
        **dict.fromkeys(
            ("modelReadSeqIOPS", "modelWriteSeqIOPS", "modelReadRandIOPS", "modelWriteRandIOPS"), i64(1)
        ),
    }
)
QOS_CLASS = Obj(
    {
        "cpuQOS": Obj({"enable": BOOL, "groupIdentity": i64(), "schedIdle": i64(), "coreExpeller": BOOL}),
        "memoryQOS": Obj(
            {
                "enable": BOOL,
                **dict.fromkeys(("minLimitPercent", "lowLimitPercent", "throttlingPercent"), i64(0)),
                "wmarkRatio": PCT,
                "wmarkScalePermill": i64(1, 1000),
                "wmarkMinAdj": i64(-25, 50),
                **dict.fromkeys(("priorityEnable", "priority", "oomKillGroup"), i64()),
                "pageCacheEnable": main(BOOL),
                "pageCacheLimitPercent": main(PCT),
                "pageCacheLimitSize": main(i64()),
                "pageCacheReclaimSync": main(BOOL),
            }
        ),
        "blkioQOS": Obj({"enable": BOOL, "blocks": Arr(Obj({"name": STR, "type": STR, "ioCfg": IO_CFG}))}),
        "resctrlQOS": Obj(
            {
                "enable": BOOL,
                **dict.fromkeys(("catRangeStartPercent", "catRangeEndPercent", "mbaPercent"), PCT),
            }
        ),
        "networkQOS": Obj(
            {
                "enable": BOOL,
                **dict.fromkeys(
                    ("ingressRequest", "ingressLimit", "egressRequest", "egressLimit"), Leaf("int-or-str")
                ),
            }
        ),
    }
)
NODESLO_SPEC = Obj(
    {
        "resourceUsedThresholdWithBE": THRESHOLDS,
        "resourceQOSStrategy": Obj(
            {
                "policies": Obj({"cpuPolicy": STR, "netQOSPolicy": STR}),
                **dict.fromkeys(("lsrClass", "lsClass", "beClass", "systemClass", "cgroupRoot"), QOS_CLASS),
            }
        ),
        "cpuBurstStrategy": Obj(
            {
                "policy": STR,
                "cpuBurstPercent": i64(0, 10000),
                **dict.fromkeys(("cfsQuotaBurstPercent", "cfsQuotaBurstPeriodSeconds"), i64()),
                "sharePoolThresholdPercent": i64(),
            }
        ),
        "systemStrategy": Obj(
            {
                **dict.fromkeys(
                    ("minFreeKbytesFactor", "watermarkScaleFactor", "memcgReapBackGround"), i64()
                ),
                **dict.fromkeys(("schedGroupIdentityEnabled", "schedIdleSaverWmark"), i64()),
                "schedFeatures": Map(BOOL),
                "pageCacheLimitEnabled": main(i64()),
                "totalNetworkBandwidth": QTY,
            }
        ),
        "extensions": Free(),
        "hostApplications": Arr(
            Obj(
                {
                    **dict.fromkeys(("name", "priority", "qos"), STR),
                    "cgroupPath": Obj(dict.fromkeys(("base", "parentDir", "relativePath"), STR)),
                    "strategy": Obj(),
                }
            )
        ),
    }
)

TABLE = {
    "nodeslos": {"spec": NODESLO_SPEC, "status": Obj()},
    "nodemetrics": {"spec": NODEMETRIC_SPEC, "status": NODEMETRIC_STATUS},
}
