"""Generate the PodGroup CustomResourceDefinition (``scheduling.sigs.k8s.io/v1alpha1``) that koord-scheduler's
Coscheduling plugin reads.

The YAML file next to this script is its output; edit the schema here and run
``python deploy/scheduler/crds/gen_podgroup_crd.py`` (``--check`` exits 1 when the file is out of date, as the
unit tests do). The schema pieces are the agent's CRD generator's (``deploy/daemonset/crds/schema_parts.py``).

The shape is Koordinator's CRD of the scheduler-plugins type (``apis/thirdparty/scheduler-plugins``):
namespaced, ``spec.minMember``/``minResources``/``scheduleTimeoutSeconds``, the status the PodGroup
controller writes, and no status subresource (the controller merge-patches the object itself, as
Koordinator's does). Constraints are no stricter than Koordinator's, so every PodGroup a Koordinator cluster
holds is accepted. The gang's other settings live in annotations (``gang.scheduling.koordinator.sh/*``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "daemonset" / "crds"))

from schema_parts import Schema, generate, integer, obj, quantity, string  # noqa: E402

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"
FILE = f"{GROUP}_podgroups.yaml"
PHASES = "Pending, PreScheduling, Scheduling, Scheduled, Running, Finished, Failed or Unknown"


def podgroup_schema() -> Schema:
    spec = obj(
        {
            "minMember": integer(
                "int32",
                description="How many of the group's pods must be placeable together before any is bound.",
            ),
            "minResources": {
                "type": "object",
                "description": "Resources the group needs at least (read, not enforced, by koord-scheduler).",
                "additionalProperties": quantity(),
            },
            "scheduleTimeoutSeconds": integer(
                "int32",
                description="Seconds a member waits at Permit for the others (when positive; at most 900, "
                "koord-scheduler's Permit limit); the plugin's defaultTimeout otherwise.",
            ),
        },
        "The gang: its size and how long its members wait for one another.",
    )
    status = obj(
        {
            "phase": string(f"Where the group is: {PHASES}."),
            "occupiedBy": string("The owners of the group's pods, namespace/name, comma-separated."),
            "scheduled": integer("int32", description="Members bound to a node."),
            "running": integer("int32", description="Members running."),
            "succeeded": integer("int32", description="Members succeeded."),
            "failed": integer("int32", description="Members failed."),
            "scheduleStartTime": string(
                "When the controller first saw the group scheduling.", format="date-time"
            ),
        },
        "Written by koord-scheduler's PodGroup controller.",
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "PodGroup: pods scheduled all or nothing (a gang); pods join it with the label "
        "pod-group.scheduling.sigs.k8s.io: <name>.",
    )


def crd() -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"podgroups.{GROUP}",
            "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
            },
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "PodGroup",
                "listKind": "PodGroupList",
                "plural": "podgroups",
                "singular": "podgroup",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": podgroup_schema()},
                }
            ],
        },
    }


def main(argv: list[str]) -> int:
    return generate(HERE, "gen_podgroup_crd.py", {FILE: crd()}, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
