"""Generate the CustomResourceDefinitions koord-scheduler's plugins read (``scheduling.sigs.k8s.io``).

The YAML files next to this script are its output; edit the schema here and run
``python deploy/scheduler/crds/gen_crds.py`` (``--check`` exits 1 when a file is out of date, as the unit
tests do). The schema pieces are the agent's CRD generator's (``deploy/daemonset/crds/schema_parts.py``).

ElasticQuota: the scheduler-plugins type Koordinator uses (``apis/thirdparty/scheduler-plugins``), with
Koordinator's CRD's shape: namespaced, ``spec.min``/``spec.max`` and ``status.used`` resource lists, and
no status subresource (koord-scheduler patches ``status.used`` on the object itself, as Koordinator's does).
The quota tree lives in labels and annotations (``quota.scheduling.koordinator.sh/*``), not in the schema.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "daemonset" / "crds"))

from schema_parts import Schema, generate, obj, quantity, string  # noqa: E402

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"


def resource_list(description: str) -> Schema:
    return {"type": "object", "description": description, "additionalProperties": quantity()}


def elasticquota_schema() -> Schema:
    spec = obj(
        {
            "min": resource_list(
                "Guaranteed resources: the quota gets what it asks for up to min, and lends the rest unless "
                'labelled quota.scheduling.koordinator.sh/allow-lent-resource: "false".'
            ),
            "max": resource_list(
                "The most the quota's pods may use; only the resources named here are limited."
            ),
        },
        "The quota's min and max.",
    )
    status = obj(
        {"used": resource_list("What the quota's placed pods request (written by koord-scheduler).")},
        "Observed use.",
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "ElasticQuota: elastic resource limits for the pods of a quota (Koordinator's quota tree).",
    )


def crd(kind: str, plural: str, schema: Schema) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
            },
        },
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def main(argv: list[str]) -> int:
    docs = {f"{GROUP}_elasticquotas.yaml": crd("ElasticQuota", "elasticquotas", elasticquota_schema())}
    return generate(HERE, "gen_crds.py", docs, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
