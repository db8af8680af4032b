"""Protobuf field numbers of the built-in messages kubectl's typed commands send (``kubectl create
namespace|configmap|secret|serviceaccount|role|rolebinding|clusterrole|clusterrolebinding|pdb|
priorityclass|service|token``, ``auth can-i``, ``auth whoami``, ``drain``), as the ``generated.proto`` files
of ``k8s.io/api`` and ``k8s.io/apimachinery`` number them.

Each field is ``jsonName=number[:type][!]``. The type is a message of this table or a scalar: ``s``
string (the default), ``y`` bytes (base64 in JSON), ``i`` a varint integer, ``b`` bool, ``t`` Time, ``mt``
MicroTime, ``ios`` IntOrString; ``[]T`` is repeated, ``{}T`` a ``map<string, T>``. gogo-protobuf writes a
Go value field even when it is zero, where JSON's ``omitempty`` would leave it out; decoding drops such
zero values unless the field is marked ``!`` (a Go pointer, or a field without ``omitempty``), so the
result is the JSON kubectl would have sent.
"""

from __future__ import annotations

MESSAGES: dict[str, str] = {
    # k8s.io/apimachinery/pkg/runtime: the envelope's type (tests.apiserver.protobuf reads runtime.Unknown)
    "runtime.TypeMeta": "apiVersion=1 kind=2",
    # k8s.io/apimachinery/pkg/apis/meta/v1
    "ObjectMeta": (
        "name=1 generateName=2 namespace=3 selfLink=4 uid=5 resourceVersion=6 generation=7:i "
        "creationTimestamp=8:t deletionTimestamp=9:t deletionGracePeriodSeconds=10:i! labels=11:{}s "
        "annotations=12:{}s ownerReferences=13:[]OwnerReference finalizers=14:[]s"
    ),
    "OwnerReference": "apiVersion=5! kind=1! name=3! uid=4! controller=6:b! blockOwnerDeletion=7:b!",
    "LabelSelector": "matchLabels=1:{}s matchExpressions=2:[]LabelSelectorRequirement",
    "LabelSelectorRequirement": "key=1! operator=2! values=3:[]s",
    "DeleteOptions": (
        "gracePeriodSeconds=1:i! preconditions=2:Preconditions! orphanDependents=3:b! "
        "propagationPolicy=4! dryRun=5:[]s"
    ),
    "Preconditions": "uid=1! resourceVersion=2!",
    # k8s.io/api/core/v1
    "Namespace": "metadata=1:ObjectMeta spec=2:NamespaceSpec status=3:NamespaceStatus",
    "NamespaceSpec": "finalizers=1:[]s",
    "NamespaceStatus": "phase=1",
    "ConfigMap": "metadata=1:ObjectMeta immutable=4:b! data=2:{}s binaryData=3:{}y",
    "Secret": "metadata=1:ObjectMeta immutable=5:b! data=2:{}y stringData=4:{}s type=3",
    "ServiceAccount": (
        "metadata=1:ObjectMeta secrets=2:[]ObjectReference imagePullSecrets=3:[]LocalObjectReference "
        "automountServiceAccountToken=4:b!"
    ),
    "ObjectReference": "kind=1 namespace=2 name=3 uid=4 apiVersion=5 resourceVersion=6 fieldPath=7",
    "LocalObjectReference": "name=1",
    "Service": "metadata=1:ObjectMeta spec=2:ServiceSpec",
    "ServiceSpec": (
        "ports=1:[]ServicePort selector=2:{}s clusterIP=3 clusterIPs=18:[]s type=4 externalIPs=5:[]s "
        "sessionAffinity=7 loadBalancerIP=8 loadBalancerSourceRanges=9:[]s externalName=10 "
        "externalTrafficPolicy=11 healthCheckNodePort=12:i publishNotReadyAddresses=13:b ipFamilies=19:[]s "
        "ipFamilyPolicy=17! allocateLoadBalancerNodePorts=20:b! loadBalancerClass=21! "
        "internalTrafficPolicy=22! trafficDistribution=23!"
    ),
    "ServicePort": "name=1 protocol=2 appProtocol=6! port=3:i! targetPort=4:ios nodePort=5:i",
    # k8s.io/api/rbac/v1
    "Role": "metadata=1:ObjectMeta rules=2:[]PolicyRule",
    "ClusterRole": "metadata=1:ObjectMeta rules=2:[]PolicyRule aggregationRule=3:AggregationRule!",
    "AggregationRule": "clusterRoleSelectors=1:[]LabelSelector",
    "RoleBinding": "metadata=1:ObjectMeta subjects=2:[]Subject roleRef=3:RoleRef!",
    "PolicyRule": "verbs=1:[]s apiGroups=2:[]s resources=3:[]s resourceNames=4:[]s nonResourceURLs=5:[]s",
    "Subject": "kind=1! apiGroup=2 name=3! namespace=4",
    "RoleRef": "apiGroup=1! kind=2! name=3!",
    # k8s.io/api/policy/v1
    "PodDisruptionBudget": "metadata=1:ObjectMeta spec=2:PodDisruptionBudgetSpec",
    "PodDisruptionBudgetSpec": (
        "minAvailable=1:ios! selector=2:LabelSelector! maxUnavailable=3:ios! unhealthyPodEvictionPolicy=4!"
    ),
    "Eviction": "metadata=1:ObjectMeta deleteOptions=2:DeleteOptions!",
    # k8s.io/api/scheduling/v1
    "PriorityClass": "metadata=1:ObjectMeta value=2:i! globalDefault=3:b description=4 preemptionPolicy=5!",
    # k8s.io/api/authentication/v1
    "TokenRequest": "metadata=1:ObjectMeta spec=2:TokenRequestSpec!",
    "TokenRequestSpec": "audiences=1:[]s expirationSeconds=4:i! boundObjectRef=3:BoundObjectReference!",
    "BoundObjectReference": "kind=1 apiVersion=2 name=3 uid=4",
    "SelfSubjectReview": "metadata=1:ObjectMeta",
    # k8s.io/api/authorization/v1
    "SelfSubjectAccessReview": "metadata=1:ObjectMeta spec=2:SelfSubjectAccessReviewSpec!",
    "SelfSubjectAccessReviewSpec": (
        "resourceAttributes=1:ResourceAttributes! nonResourceAttributes=2:NonResourceAttributes!"
    ),
    "ResourceAttributes": (
        "namespace=1 verb=2 group=3 version=4 resource=5 subresource=6 name=7 "
        "fieldSelector=8:SelectorAttributes! labelSelector=9:SelectorAttributes!"
    ),
    "SelectorAttributes": "rawSelector=1 requirements=2:[]LabelSelectorRequirement",
    "NonResourceAttributes": "path=1 verb=2",
    "SelfSubjectRulesReview": "metadata=1:ObjectMeta spec=2:SelfSubjectRulesReviewSpec!",
    "SelfSubjectRulesReviewSpec": "namespace=1",
}

# (apiVersion, kind) -> message; DeleteOptions is accepted under any apiVersion (every group registers it).
KINDS: dict[tuple[str, str], str] = {
    **{
        ("v1", kind): kind
        for kind in ("Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service", "DeleteOptions")
    },
    **{
        ("rbac.authorization.k8s.io/v1", kind): message
        for kind, message in (
            ("Role", "Role"),
            ("ClusterRole", "ClusterRole"),
            ("RoleBinding", "RoleBinding"),
            ("ClusterRoleBinding", "RoleBinding"),  # the same fields
        )
    },
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
}
ANY_VERSION_KINDS = frozenset({"DeleteOptions"})
