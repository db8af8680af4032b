"""The NodeResourceTopology CustomResourceDefinition (``topology.node.k8s.io``), rendered by ``gen_crds.py``.

The type is the Kubernetes community's (github.com/k8stopologyawareschedwg/noderesourcetopology-api, KEP
https://github.com/kubernetes/enhancements/pull/1870), which Koordinator ships and koordlet writes
(v1alpha1). Both versions are served, v1alpha2 stored, as the upstream CRD has it, so applying this over a
cluster that has the upstream CRD changes nothing; the fields are the same in both save that v1alpha2 adds
top-level ``attributes`` and no longer requires ``topologyPolicies``.
"""

from __future__ import annotations

from typing import Any

from schema_parts import Schema, array, integer, obj, quantity, string

GROUP = "topology.node.k8s.io"
APPROVAL = "https://github.com/kubernetes/enhancements/pull/1870"
"""A CRD in a ``*.k8s.io`` group must name where the API was approved, or the API server refuses it."""


def _attributes() -> Schema:
    return array(obj({"name": string(), "value": string()}, required=["name", "value"]))


def _zones() -> Schema:
    resource = obj(
        {
            "name": string("Name of the resource (cpu, memory, hugepages-2Mi...)."),
            "capacity": quantity("Total amount of the resource in the zone."),
            "allocatable": quantity("What pods may use in the zone."),
            "available": quantity("Allocatable minus what pods hold now."),
        },
        required=["allocatable", "available", "capacity", "name"],
    )
    zone = obj(
        {
            "name": string("node-<NUMA node id> for a NUMA node."),
            "type": string("Node for a NUMA node."),
            "parent": string(),
            "costs": array(obj({"name": string(), "value": integer("int64")}, required=["name", "value"])),
            "attributes": _attributes(),
            "resources": array(resource),
        },
        required=["name", "type"],
    )
    return array(zone, "One zone per NUMA node.")


def _schema(version: str) -> Schema:
    props: dict[str, Any] = {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "topologyPolicies": array(string(), "The kubelet's topology manager policy and scope, one entry."),
        "zones": _zones(),
    }
    if version == "v1alpha2":
        props["attributes"] = _attributes()
    required = ["topologyPolicies", "zones"] if version == "v1alpha1" else ["zones"]
    return obj(props, "NodeResourceTopology describes node resources and their topology.", required=required)


def nrt_crd() -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"noderesourcetopologies.{GROUP}",
            "annotations": {"api-approved.kubernetes.io": APPROVAL},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "NodeResourceTopology",
                "listKind": "NodeResourceTopologyList",
                "plural": "noderesourcetopologies",
                "singular": "noderesourcetopology",
                "shortNames": ["node-res-topo"],
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": v == "v1alpha2",
                    "schema": {"openAPIV3Schema": _schema(v)},
                }
                for v in ("v1alpha1", "v1alpha2")
            ],
        },
    }
