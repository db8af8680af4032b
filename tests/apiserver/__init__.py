"""An in-repo Kubernetes API server for tests (stdlib ``ThreadingHTTPServer``), used with the official client.

Covered: core ``v1`` pods (with ``pods/binding`` and ``pods/eviction``), bindings, nodes, namespaces,
events, configmaps, ``coordination.k8s.io/v1`` leases, ``policy/v1`` poddisruptionbudgets (with status),
``events.k8s.io/v1`` events, ``apiextensions.k8s.io/v1`` CRDs (creating one serves its resources, so ``kubectl apply -f`` works), and
custom resources; GET/LIST/WATCH/POST/PUT/PATCH/DELETE (and deletecollection); a global resourceVersion
with bounded history (410 Gone past it); server-set uid, creationTimestamp, generation; the status
subresource; merge, JSON and (approximated) strategic-merge patch; field and label selectors; watch replay,
``timeoutSeconds``, BOOKMARKs; pod eviction (UID preconditions, a 429 switch); discovery; CRD schema
validation (422) with pruning of unknown fields; fault switches (down/up, 503, injected failures).

NOT covered: authentication and authorization (every request is allowed), admission (no defaulting beyond
the above, no webhooks, no quota, no PodDisruptionBudget objects), server-side apply, protobuf and YAML
bodies, dry run, finalizers and graceful deletion (deletes are immediate), owner-reference garbage
collection, namespace existence and lifecycle, CRD version conversion, list pagination (``limit`` is
ignored), ``resourceVersionMatch``, watch-list/``sendInitialEvents``, built-in type validation (pods are not
checked), the OpenAPI documents (``kubectl apply`` needs ``--validate=false``), aggregated discovery,
Table output (kubectl falls back to plain lists), ``pods/log``/``exec`` bodies, and TLS.
"""

from tests.apiserver.server import APIServer, Request
from tests.apiserver.status import APIError
from tests.apiserver.store import Store

__all__ = ["APIError", "APIServer", "Request", "Store"]
