"""Generate the Reservation CustomResourceDefinition (``scheduling.koordinator.sh/v1alpha1``) that
koord-scheduler's Reservation plugin reads and writes.

The YAML file next to this script is its output; edit the schema here and run
``python deploy/scheduler/crds/gen_reservation_crd.py`` (``--check`` exits 1 when the file is out of date,
as the unit tests do). The schema pieces are the agent's CRD generator's
(``deploy/daemonset/crds/schema_parts.py``).

The shape is Koordinator's (``apis/scheduling/v1alpha1/reservation_types.go``, its generated
``config/crd/bases/scheduling.koordinator.sh_reservations.yaml``): cluster-scoped, a status subresource
(koord-scheduler writes the status there), ``spec.template`` a pod template kept as written, ``spec.owners``
required (at least one), ``ttl`` defaulting to 24h and ``allocateOnce`` to true, the same printer columns.
Constraints are no stricter than Koordinator's, so every Reservation a Koordinator cluster holds is
accepted; ``preAllocation`` and ``preAllocationPolicy`` are in the schema (so such objects are kept whole)
although this koord-scheduler does not pre-allocate.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "daemonset" / "crds"))

from schema_parts import (  # noqa: E402
    Schema,
    array,
    boolean,
    cluster_crd,
    free_object,
    generate,
    obj,
    object_reference,
    quantity,
    string,
)

GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"
FILE = f"{GROUP}_reservations.yaml"
PHASES = "Pending, Available, Succeeded, Waiting or Failed"


def resource_list(description: str) -> Schema:
    return {"type": "object", "description": description, "additionalProperties": quantity()}


def owner() -> Schema:
    controller = obj(
        {
            "apiVersion": string(),
            "blockOwnerDeletion": boolean(),
            "controller": boolean(),
            "kind": string(),
            "name": string(),
            "namespace": string("The namespace of the owned pods (any when empty)."),
            "uid": string(),
        },
        "Pods one of whose owner references matches (every field given must be equal).",
        required=["apiVersion", "kind", "name", "uid"],
    )
    requirement = obj(
        {"key": string(), "operator": string(), "values": array(string())}, required=["key", "operator"]
    )
    selector = obj(
        {
            "matchExpressions": array(requirement),
            "matchLabels": {"type": "object", "additionalProperties": string()},
        },
        "Pods whose labels match.",
    )
    return obj(
        {
            "object": object_reference("One pod (by uid, name, namespace: the fields given)."),
            "controller": controller,
            "labelSelector": selector,
        },
        "One owner: the fields given are ANDed.",
        minProperties=1,
    )


def taint() -> Schema:
    return obj(
        {
            "effect": string(),
            "key": string(),
            "timeAdded": string(format="date-time"),
            "value": string(),
        },
        required=["effect", "key"],
    )


def spec() -> Schema:
    pre_allocation = obj(
        {
            "enableMultiple": {"type": "boolean", "default": False},
            "mode": {"type": "string", "default": "Default", "enum": ["Default", "Cluster"]},
        },
        "How pre-allocation picks pods (not supported by this koord-scheduler).",
    )
    return obj(
        {
            "allocateOnce": {
                "type": "boolean",
                "default": True,
                "description": "Only the first owner placed may use the reserved resources (then Succeeded).",
            },
            "allocatePolicy": string(
                "Aligned: what the reservation lacks comes from the node; Restricted: the reserved resources "
                "come from the reservation only. Empty is the deprecated default (treated as Aligned).",
                enum=["Aligned", "Restricted"],
            ),
            "expires": string("When the reservation expires (checked before ttl).", format="date-time"),
            "owners": {
                **array(owner(), "Who may use the reserved resources: a pod matching one of the owners."),
                "minItems": 1,
            },
            "preAllocation": boolean("Reserve from running pods (not supported by this koord-scheduler)."),
            "preAllocationPolicy": pre_allocation,
            "taints": array(taint(), "Pods need a toleration in their reservation affinity to use it."),
            "template": free_object(
                "The pod template the reservation is scheduled as (resources, affinities...); "
                "template.spec.nodeName pins it to that node."
            ),
            "ttl": {
                "type": "string",
                "default": "24h",
                "description": "How long after creation the reservation expires; 0s: never.",
            },
            "unschedulable": boolean("New owners may not use it (unless they tolerate that)."),
        },
        "What to reserve, for whom, and for how long.",
        required=["owners", "template"],
    )


def status() -> Schema:
    condition = obj(
        {
            "lastProbeTime": string(format="date-time"),
            "lastTransitionTime": string(format="date-time"),
            "message": string(),
            "reason": string(),
            "status": string(),
            "type": string(),
        }
    )
    return obj(
        {
            "allocatable": resource_list("What is reserved and allocatable for the owners."),
            "allocated": resource_list("What the current owners use of it."),
            "conditions": array(condition, "Scheduled and Ready, with why."),
            "currentOwners": array(object_reference("An owner placed in the reservation.")),
            "nodeName": string("The node the reservation was placed on."),
            "phase": string(f"Where the reservation is: {PHASES}.", default="Pending"),
        },
        "Written by koord-scheduler.",
    )


def crd() -> Schema:
    schema = obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec(),
            "status": status(),
        },
        "Reservation: resources held on a node for the pods it names (cluster-scoped).",
    )
    columns = [
        {
            "description": "The phase of reservation",
            "jsonPath": ".status.phase",
            "name": "Phase",
            "type": "string",
        },
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".status.nodeName", "name": "Node", "type": "string"},
        {"jsonPath": ".spec.ttl", "name": "TTL", "type": "string"},
        {"jsonPath": ".spec.expires", "name": "Expires", "type": "string"},
    ]
    names = {
        "kind": "Reservation",
        "listKind": "ReservationList",
        "plural": "reservations",
        "singular": "reservation",
    }
    return cluster_crd(GROUP, VERSION, names, schema, columns)


def main(argv: list[str]) -> int:
    return generate(HERE, "gen_reservation_crd.py", {FILE: crd()}, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
