"""An in-repo Kubernetes API server for tests (stdlib ``ThreadingHTTPServer``), used with the official client;
``python -m tests.apiserver`` runs one outside pytest.

Served: core ``v1`` pods (``status``, ``binding``, ``eviction``), bindings, nodes, namespaces, events,
configmaps, serviceaccounts, persistentvolumeclaims and persistentvolumes (with status);
``storage.k8s.io/v1`` storageclasses; ``coordination.k8s.io/v1`` leases; ``policy/v1``
poddisruptionbudgets (with status); ``events.k8s.io/v1`` events (the same store as core events);
``scheduling.k8s.io/v1`` priorityclasses; ``rbac.authorization.k8s.io/v1``; TokenReview and
SubjectAccessReview; ``apiextensions.k8s.io/v1`` CRDs (creating one serves its resources, so
``kubectl apply -f`` works) and custom resources validated against their schema (422) with unknown
fields pruned; discovery.

Behaviour, each written from the kube-apiserver code it names in its module: GET/LIST/WATCH/POST/PUT/
PATCH/DELETE and deletecollection; one global resourceVersion with per-resource history (410 Gone past it);
paged lists (``limit``/``continue`` on a consistent snapshot); watch replay, ``timeoutSeconds`` and
BOOKMARKs (periodic and 2 s before the timeout); field and label selectors; registry strategies (defaults,
create/update rules, pod immutability, validation), admission on create (namespace lifecycle, priority,
default tolerations, service account); strategic merge patch for built-in types (415 on custom
resources), merge and JSON patch; ``dryRun``; graceful deletion and finalizers with a kubelet hook;
binding; eviction against PodDisruptionBudgets with a disruption controller; opt-in RBAC authorization of
ServiceAccount tokens; fault switches (down/up, 503, injected failures).

Module map: ``server`` (lifecycle, switches, auth entry), ``handler`` (HTTP, routing, watch streams),
``requestinfo``, ``endpoints`` (verbs and options), ``store``/``writes``/``history``/``paging``/``watch``
(storage), ``strategy``/``podspec``/``validation``/``admission``/``deletion`` (registry rules),
``smp``/``patch``, ``binding``/``eviction``/``disruption``/``kubelet``, ``events``, ``auth``/``rbac``/
``reviews``, ``manifests``, ``builtin``/``resources`` (types and discovery), ``fixtures`` (pytest only).

NOT covered (a component relying on these is not proven by this server):

* Server-side apply (``application/apply-patch+yaml`` is a 415), ``managedFields``, protobuf and YAML
  bodies, Table output (kubectl falls back to plain lists), the OpenAPI documents (``kubectl apply``
  needs ``--validate=false``), aggregated discovery, watch-list (``sendInitialEvents``), TLS.
* Admission webhooks, ResourceQuota/LimitRange, PodSecurity, the ServiceAccount token volume (pods get
  ``serviceAccountName: default`` but the account need not exist), NodeRestriction.
* Workload controllers: no Deployments/ReplicaSets/DaemonSets are served, so no garbage collection of
  dependents (``ownerReferences`` and ``propagationPolicy`` are stored, not acted on) and the disruption
  controller scales percentage/``maxUnavailable`` budgets by the matching pods, not by controllers'
  replicas (see ``disruption``). It runs synchronously, so its status never lags unless paused.
* No kubelet or scheduler: pods stay Pending until a test binds them and reports status; graceful
  deletion waits for ``APIServer.kubelet`` (or ``kubelet_auto_confirm``); deletion grace periods never
  expire on their own.
* Namespace deletion is immediate and leaves the namespace's objects (no namespace controller).
* Pod validation covers containers, names, resources and the update rules, not the whole of
  ``ValidatePodSpec`` (volumes, probes, security contexts, affinity syntax...); other built-in types are
  validated as their modules say; ``generation`` is kept for every type, not only those whose strategy
  sets it; ``""``/empty fields the Go types omit are stored as given.
* RBAC: aggregated ClusterRoles, impersonation, user/group tokens other than the ones issued here, the
  Node authorizer, ``selfsubjectrulesreviews``; TokenRequest (``serviceaccounts/token``) and bound tokens.
* Lists with ``resourceVersion=0`` honour ``limit`` (the watch cache would ignore it); ``events.k8s.io``
  field selectors are the common ones only; CRD version conversion;
  ``pods/log``/``exec``/``proxy`` bodies; ``/status`` writes of metadata are ignored for every type.
"""

from tests.apiserver.server import APIServer, Request
from tests.apiserver.status import APIError
from tests.apiserver.store import Store

__all__ = ["APIError", "APIServer", "Request", "Store"]
