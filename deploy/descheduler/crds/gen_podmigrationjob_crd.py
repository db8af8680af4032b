"""Generate the PodMigrationJob CustomResourceDefinition (``scheduling.koordinator.sh/v1alpha1``) that
koord-descheduler's MigrationController writes and reconciles.

The YAML file next to this script is its output; edit the schema here and run
``python deploy/descheduler/crds/gen_podmigrationjob_crd.py`` (``--check`` exits 1 when the file is out of
date, as the unit tests do). The schema pieces are the agent's CRD generator's
(``deploy/daemonset/crds/schema_parts.py``).

The shape is Koordinator's (``apis/scheduling/v1alpha1/pod_migration_job_types.go``): cluster-scoped
(short name ``pmj``), a status subresource, ``spec.podRef`` required, ``spec.reservationOptions.template``
a Reservation template kept as written, ``spec.deleteOptions`` a ``DeleteOptions``, and the same printer
columns. Constraints are no stricter than Koordinator's, so every job a Koordinator cluster holds is kept.
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
    integer,
    obj,
    object_reference,
    string,
)

GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"
FILE = f"{GROUP}_podmigrationjobs.yaml"
PHASES = "Pending, Running, Succeeded, Failed or Aborted"


def delete_options() -> Schema:
    return obj(
        {
            "apiVersion": string(),
            "dryRun": array(string()),
            "gracePeriodSeconds": integer("int64"),
            "kind": string(),
            "orphanDependents": boolean(),
            "preconditions": obj({"resourceVersion": string(), "uid": string()}),
            "propagationPolicy": string(),
        },
        "How the pod is evicted (its grace period above all); the descheduler's defaultDeleteOptions "
        "when absent.",
    )


def spec() -> Schema:
    reservation_options = obj(
        {
            "reservationRef": object_reference(
                "The Reservation to use; created from the template (and set here) when absent."
            ),
            "template": free_object(
                "The Reservation to create (metadata and spec); its pod template defaults to the pod's."
            ),
            "preemptionOptions": {"type": "object", "description": "Reserved."},
        },
        "The Reservation of a ReservationFirst job.",
    )
    return obj(
        {
            "paused": boolean("The job is not worked on while true."),
            "ttl": string("How long the job may take from its creation (a Go duration, e.g. 5m)."),
            "mode": string(
                "ReservationFirst (reserve room for the replacement, then evict) or EvictDirectly; the "
                "descheduler's defaultJobMode when empty."
            ),
            "podRef": object_reference("The pod to move (namespace and name; uid set by the controller)."),
            "reservationOptions": reservation_options,
            "deleteOptions": delete_options(),
        },
        "Which pod to move, how and within what time.",
        required=["podRef"],
    )


def status() -> Schema:
    condition = obj(
        {
            "lastProbeTime": {"type": "string", "format": "date-time", "nullable": True},
            "lastTransitionTime": {"type": "string", "format": "date-time", "nullable": True},
            "message": string(),
            "reason": string(),
            "status": string(),
            "type": string(),
        },
        required=["status", "type"],
    )
    preempted = obj(
        {
            "name": string(),
            "namespace": string(),
            "nodeName": string(),
            "phase": string(),
            "podsRef": array(object_reference()),
            "preemptedPodRef": object_reference(),
        }
    )
    return obj(
        {
            "phase": string(f"Where the job is: {PHASES}."),
            "status": string("The last step (a condition type, or Complete)."),
            "reason": string("Why the job is in this state, one CamelCase word."),
            "message": string("Why the job is in this state."),
            "conditions": array(
                condition, "The steps: ReservationCreated, ReservationScheduled, Eviction..."
            ),
            "nodeName": string("The node reserved for the replacement."),
            "podRef": object_reference("The replacement pod placed in the reservation."),
            "preemptedPodsRef": array(object_reference()),
            "preemptedPodsReservation": array(preempted),
        },
        "Written by koord-descheduler.",
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
        "PodMigrationJob: one pod moved by the descheduler (cluster-scoped).",
    )
    columns = [
        ("Phase", "string", ".status.phase", "The phase of PodMigrationJob"),
        ("Status", "string", ".status.status", "The status of PodMigrationJob"),
        ("Age", "date", ".metadata.creationTimestamp", ""),
        ("Node", "string", ".status.nodeName", ""),
        ("Reservation", "string", ".spec.reservationOptions.reservationRef.name", ""),
        ("PodNamespace", "string", ".spec.podRef.namespace", ""),
        ("Pod", "string", ".spec.podRef.name", ""),
        ("NewPod", "string", ".status.podRef.name", ""),
        ("TTL", "string", ".spec.ttl", ""),
    ]
    names = {
        "kind": "PodMigrationJob",
        "listKind": "PodMigrationJobList",
        "plural": "podmigrationjobs",
        "shortNames": ["pmj"],
        "singular": "podmigrationjob",
    }
    printer = [
        {**({"description": d} if d else {}), "jsonPath": path, "name": name, "type": typ}
        for name, typ, path, d in columns
    ]
    return cluster_crd(GROUP, VERSION, names, schema, printer)


def main(argv: list[str]) -> int:
    return generate(HERE, "gen_podmigrationjob_crd.py", {FILE: crd()}, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
