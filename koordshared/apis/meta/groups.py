"""Where the objects every process reads live: API group, version and resource of each kind, their REST
paths, and the field selectors the processes list them with. One home, so no process spells
``slo.koordinator.sh`` or a pod phase selector itself. Pure: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource (``group`` empty for the core group)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """The objects' ``apiVersion`` (``v1``, ``slo.koordinator.sh/v1alpha1``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, name: str = "", namespace: str = "") -> str:
        """The REST path of the collection (or of ``name`` in it), in ``namespace`` when given."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        scope = f"/namespaces/{namespace}" if namespace and self.namespaced else ""
        return f"{root}{scope}/{self.plural}" + (f"/{name}" if name else "")


SLO_GROUP = "slo.koordinator.sh"
SCHEDULING_GROUP = "scheduling.koordinator.sh"
TOPOLOGY_GROUP = "topology.node.k8s.io"
SIGS_SCHEDULING_GROUP = "scheduling.sigs.k8s.io"
"""The group of the scheduler-plugins CRDs Koordinator uses (ElasticQuota, PodGroup)."""

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
NODE_METRICS = Resource(SLO_GROUP, "v1alpha1", "nodemetrics", "NodeMetric", namespaced=False)
NODE_SLOS = Resource(SLO_GROUP, "v1alpha1", "nodeslos", "NodeSLO", namespaced=False)
NODE_RESOURCE_TOPOLOGIES = Resource(
    TOPOLOGY_GROUP, "v1alpha1", "noderesourcetopologies", "NodeResourceTopology", namespaced=False
)
"""Written by the agent, one per node (``docs/node-scheduler-contract.md``); read by koord-scheduler."""
DEVICES = Resource(SCHEDULING_GROUP, "v1alpha1", "devices", "Device", namespaced=False)
"""One per node, named after it: the node's GPUs, RDMA NICs and FPGAs (read by DeviceShare)."""
PODGROUPS = Resource(SIGS_SCHEDULING_GROUP, "v1alpha1", "podgroups", "PodGroup", namespaced=True)
ELASTIC_QUOTAS = Resource(SIGS_SCHEDULING_GROUP, "v1alpha1", "elasticquotas", "ElasticQuota", namespaced=True)
RESERVATIONS = Resource(SCHEDULING_GROUP, "v1alpha1", "reservations", "Reservation", namespaced=False)
POD_MIGRATION_JOBS = Resource(
    SCHEDULING_GROUP, "v1alpha1", "podmigrationjobs", "PodMigrationJob", namespaced=False
)
"""Written by koord-descheduler's MigrationController (and users): one pod to move."""

NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
"""The pods that hold resources on a node: every process lists pods with this selector (kube-scheduler's
and Koordinator's informers do the same)."""


def on_node(node: str) -> str:
    """Field selector of the pods bound to ``node``."""
    return f"spec.nodeName={node}"


def named(name: str) -> str:
    """Field selector of the object called ``name``."""
    return f"metadata.name={name}"
