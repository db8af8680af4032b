"""An in-repo Kubernetes API server for tests (stdlib ``ThreadingHTTPServer``), used with the official client;
``python -m tests.apiserver`` runs one outside pytest.

Served: core ``v1`` pods (``status``, ``binding``, ``eviction``), bindings, nodes, namespaces, events,
configmaps, serviceaccounts; ``coordination.k8s.io/v1`` leases; ``policy/v1`` poddisruptionbudgets (with
status); ``events.k8s.io/v1`` events (the same store as core events); ``scheduling.k8s.io/v1``
priorityclasses; ``rbac.authorization.k8s.io/v1``; TokenReview and SubjectAccessReview;
``apiextensions.k8s.io/v1`` CRDs (creating one serves its resources, so ``kubectl apply -f`` works) and
custom resources validated against their schema (422) with unknown fields pruned; discovery.

Behaviour, each written from the kube-apiserver code it names in its module: GET/LIST/WATCH/POST/PUT/
PATCH/DELETE and deletecollection; one global resourceVersion with per-resource history (410 Gone past it);
paged lists (``limit``/``continue`` on a consistent snapshot); watch replay, ``timeoutSeconds`` and
BOOKMARKs (periodic and 2 s before the timeout); field and label selectors; registry strategies (defaults,
create/update rules, pod immutability, validation), admission on create (namespace lifecycle, priority,
default tolerations, service account); strategic merge patch for built-in types (415 on custom
resources), merge and JSON patch; ``dryRun``; graceful deletion and finalizers with a kubelet hook;
binding; eviction against PodDisruptionBudgets with a disruption controller; opt-in RBAC authorization of
ServiceAccount tokens; fault switches (down/up, 503, injected failures).

NOT covered: see the end of this docstring (kept current as the server grows).
"""

from tests.apiserver.server import APIServer, Request
from tests.apiserver.status import APIError
from tests.apiserver.store import Store

__all__ = ["APIError", "APIServer", "Request", "Store"]
