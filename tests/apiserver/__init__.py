"""An in-repo Kubernetes API server for tests (stdlib ``ThreadingHTTPServer``), used with the official client
and with the real kubectl; ``python -m tests.apiserver`` runs one outside pytest.

Served: core ``v1`` pods (``status``, ``binding``, ``eviction``), bindings, nodes, namespaces, events,
configmaps, secrets, services, serviceaccounts (``token``), persistentvolumeclaims and persistentvolumes
(with status); ``apps/v1`` deployments (``scale``) and daemonsets; ``storage.k8s.io/v1`` storageclasses;
``coordination.k8s.io/v1`` leases; ``policy/v1`` poddisruptionbudgets (with status); ``events.k8s.io/v1``
events (the same store as core events); ``scheduling.k8s.io/v1`` priorityclasses;
``rbac.authorization.k8s.io/v1``; TokenReview, SubjectAccessReview and the self reviews (access, rules,
who-am-I); ``apiextensions.k8s.io/v1`` CRDs (creating one serves its resources) and custom resources
validated against their schema (422) with unknown fields pruned; discovery (categories, subresource
kinds); ``/openapi/v2`` (JSON and protobuf) and ``/openapi/v3``.

Behaviour, each written from the kube-apiserver code it names in its module: GET/LIST/WATCH/POST/PUT/
PATCH/DELETE and deletecollection; bodies in JSON, YAML or protobuf (the kinds kubectl's typed commands
send; 415 otherwise), chunked or not; one global resourceVersion with per-resource history (410 Gone past
it); paged lists (``limit``/``continue`` on a consistent snapshot); watch replay, ``timeoutSeconds`` and
BOOKMARKs (periodic and 2 s before the timeout); Table output (``kubectl get``); field and label
selectors; registry strategies (defaults, create/update rules, pod immutability, validation);
``fieldValidation`` (Strict/Warn/Ignore, ``Warning`` headers) for built-in types and custom resources;
list items of built-in types without ``kind``/``apiVersion`` (as a typed list encodes them; GET, watch
and custom resources keep theirs);
admission on create (namespace lifecycle, priority, default tolerations, service account) and on pod
updates (default tolerations, kept priority); strategic merge patch for built-in types (415 on custom
resources), merge and JSON patch; ``dryRun``; graceful deletion and finalizers with a kubelet hook;
binding; eviction against PodDisruptionBudgets with a disruption controller; Service cluster IP and node
port allocation; opt-in TLS (generated CA) and RBAC authorization of bearer tokens (off, every request
is allowed and the access reviews say so, as kube-apiserver's ``AlwaysAllow``); TokenRequest; fault
switches (down/up, 503, injected failures).

Which tier proves what. This server is the fast tier: a component's requests, its handling of answers,
watches, paging, outages and RBAC, run in seconds in every test. The real-cluster tier
(``tests/realcluster/``, against a kube-apiserver) is what proves admission, graceful deletion,
validation and Events as kube-apiserver does them; where the two disagree, the real one is right and this
server is changed to match it (or the test moves to that tier). Changed after a run against kube-apiserver
v1.34 to v1.36 showed the difference:

* LIST items of built-in types carried ``kind``/``apiVersion`` (kube-apiserver's do not; a component
  reading an item's kind, an Event reference above all, got an empty one there).
* With authorization off, SelfSubjectAccessReviews evaluated RBAC, so ``kubectl auth can-i`` said no to
  what the server then allowed; access reviews now ask the authorizer in force.
* ``events.k8s.io/v1`` took only the common field selectors (``regarding.kind``, ``reportingController``
  were a 400), its Table rows printed no object, and a ``series`` under 2 was stored.

Module map: ``server`` (lifecycle, switches, auth entry), ``connections``/``tls`` (sockets, HTTPS),
``handler`` (HTTP, routing, watch streams), ``bodies``/``protobuf``/``protomessages`` (request bodies),
``requestinfo``, ``requestwarnings``, ``endpoints`` (verbs and options), ``store``/``writes``/``history``/
``paging``/``watch`` (storage), ``strategy``/``podspec``/``workloads``/``services``/``validation``/
``fieldvalidation``/``admission``/``deletion`` (registry rules), ``typeschema`` (the built-in types'
structure, from the official client's models), ``smp``/``patchmeta``/``patch``, ``binding``/``eviction``/
``disruption``/``kubelet``, ``events``, ``auth``/``rbac``/``reviews``/``tokens``, ``tables``/``printers``/
``ages`` (Table output), ``openapi``/``openapischema``/``openapiproto``, ``manifests``, ``builtin``/
``resources`` (types and discovery), ``fixtures`` (pytest only).

NOT covered (a component relying on these is not proven by this server):

* Server-side apply: ``application/apply-patch+yaml`` is a 415 listing the patch types accepted (kubectl:
  "Server-side apply not available on the server"), and no ``managedFields`` are kept. Protobuf bodies
  of kinds outside :mod:`tests.apiserver.protomessages` (``kubectl create deployment``) are a 415 too;
  answers are always JSON. Aggregated discovery, watch-list (``sendInitialEvents``), CBOR.
* Admission webhooks, ResourceQuota/LimitRange, PodSecurity, the ServiceAccount token volume (pods get
  ``serviceAccountName: default`` but the account need not exist), NodeRestriction.
* Workload controllers: Deployments and DaemonSets are stored, defaulted and validated, but nothing creates
  their pods or writes their status; no garbage collection of dependents (``ownerReferences`` and
  ``propagationPolicy`` are stored, not acted on), and the disruption controller scales
  percentage/``maxUnavailable`` budgets by the matching pods, not by controllers' replicas (see
  ``disruption``). It runs synchronously, so its status never lags unless paused. No Endpoints.
* No kubelet or scheduler: pods stay Pending until a test binds them and reports status; graceful
  deletion waits for ``APIServer.kubelet`` (or ``kubelet_auto_confirm``); deletion grace periods never
  expire on their own.
* Namespace deletion is immediate and leaves the namespace's objects (no namespace controller).
* Pod validation covers containers, names, resources and the update rules, not the whole of
  ``ValidatePodSpec`` (volumes, probes, security contexts, affinity syntax...); other built-in types are
  validated as their modules say; ``generation`` is kept for every type, not only those whose strategy
  sets it; ``""``/empty fields the Go types omit are stored as given.
* RBAC: aggregated ClusterRoles, impersonation, user/group tokens other than the ones issued here, the
  Node authorizer; tokens are opaque (not JWTs) and a bound object's deletion does not revoke its token.
* Lists with ``resourceVersion=0`` honour ``limit`` (the watch cache would ignore it); an
  ``events.k8s.io/v1`` create or update is not held to that version's stricter rules beyond ``eventTime``,
  ``type`` and ``series`` (the deprecated fields unset, the immutable fields of an update); CRD version
  conversion;
  ``pods/log``/``exec``/``proxy`` bodies; ``/status`` writes of metadata are ignored for every type.
"""

from tests.apiserver.server import APIServer, Request
from tests.apiserver.status import APIError
from tests.apiserver.store import Store

__all__ = ["APIError", "APIServer", "Request", "Store"]
