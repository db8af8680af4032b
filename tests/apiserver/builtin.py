"""The built-in resource types the test API server serves, with what discovery and RBAC see of them.

Per type: the field selectors the real server accepts (anything else is a 400 "field label not
supported"), short names, categories, the verbs discovery lists, subresources with the kind their
bodies carry (``pods/eviction`` is a ``policy/v1`` Eviction, ``serviceaccounts/token`` an
``authentication.k8s.io/v1`` TokenRequest, ``deployments/scale`` an ``autoscaling/v1`` Scale), and whether
a PUT may omit ``metadata.resourceVersion`` (each registry strategy's ``AllowUnconditionalUpdate``: false
for Leases, PodDisruptionBudgets and CRDs, as for custom resources). Discovery as a v1.33 server lists it.
"""

from __future__ import annotations

from tests.apiserver import events
from tests.apiserver.resources import COMMON_FIELDS, ResourceType, Subresource

POD_FIELDS = COMMON_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
EVENT_FIELDS = COMMON_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
CREATE_ONLY = ("create",)
GET_UPDATE = ("get", "patch", "update")
ALL = ("all",)
SECRET_FIELDS = COMMON_FIELDS | {"type"}
NAMESPACE_FIELDS = COMMON_FIELDS | {"status.phase"}

BUILTIN = (
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        True,
        POD_FIELDS,
        ("po",),
        subresources=(
            Subresource("binding", CREATE_ONLY, "Binding"),
            Subresource("eviction", CREATE_ONLY, "Eviction", "policy", "v1"),
            Subresource("log", ("get",), "Pod"),
        ),
        categories=ALL,
        field_defaults=(("spec.hostNetwork", "false"),),
    ),
    ResourceType("", "v1", "bindings", "Binding", True, False, verbs=CREATE_ONLY),
    ResourceType(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        True,
        COMMON_FIELDS | {"spec.unschedulable"},
        ("no",),
        delete_returns_object=False,
        field_defaults=(("spec.unschedulable", "false"),),
    ),
    ResourceType("", "v1", "namespaces", "Namespace", False, True, NAMESPACE_FIELDS, ("ns",)),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        True,
        True,
        short_names=("svc",),
        categories=ALL,
        delete_returns_object=True,
    ),
    ResourceType("", "v1", "secrets", "Secret", True, False, SECRET_FIELDS, delete_returns_object=False),
    ResourceType(
        "", "v1", "events", "Event", True, False, EVENT_FIELDS, ("ev",), delete_returns_object=False
    ),
    ResourceType(
        "", "v1", "configmaps", "ConfigMap", True, False, COMMON_FIELDS, ("cm",), delete_returns_object=False
    ),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        False,
        frozenset(events.FIELD_LABELS),
        ("ev",),
        storage=("", "events"),
        delete_returns_object=False,
        field_labels=tuple(events.FIELD_LABELS.items()),
    ),
    ResourceType(
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        True,
        False,
        unconditional_update=False,
        delete_returns_object=False,
    ),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        True,
        COMMON_FIELDS,
        ("pdb",),
        unconditional_update=False,
        delete_returns_object=False,
    ),
    ResourceType(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        False,
        short_names=("sa",),
        subresources=(Subresource("token", CREATE_ONLY, "TokenRequest", "authentication.k8s.io", "v1"),),
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        True,
        True,
        short_names=("deploy",),
        subresources=(Subresource("scale", GET_UPDATE, "Scale", "autoscaling", "v1"),),
        categories=ALL,
        delete_returns_object=False,
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        True,
        True,
        short_names=("ds",),
        categories=ALL,
        delete_returns_object=False,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        True,
        COMMON_FIELDS,
        ("pvc",),
        delete_returns_object=False,
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        False,
        True,
        COMMON_FIELDS,
        ("pv",),
        delete_returns_object=False,
    ),
    ResourceType(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        False,
        False,
        short_names=("sc",),
        delete_returns_object=False,
    ),
    *(
        ResourceType(
            "rbac.authorization.k8s.io", "v1", plural, kind, namespaced, False, delete_returns_object=False
        )
        for plural, kind, namespaced in (
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
        )
    ),
    *(
        ResourceType(group, "v1", plural, kind, False, False, verbs=CREATE_ONLY)
        for group, plural, kind in (
            ("authentication.k8s.io", "tokenreviews", "TokenReview"),
            ("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview"),
            ("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"),
            ("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
            ("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
        )
    ),
    # Stored only: the fake calls no webhook (the real tier proves admission through them).
    *(
        ResourceType(
            "admissionregistration.k8s.io", "v1", plural, kind, False, False, delete_returns_object=False
        )
        for plural, kind in (
            ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
            ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
        )
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        False,
        False,
        short_names=("pc",),
        delete_returns_object=False,
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        True,
        COMMON_FIELDS,
        ("crd", "crds"),
        unconditional_update=False,
    ),
)
