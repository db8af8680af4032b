"""``POST pods/<name>/eviction`` (policy/v1 Eviction) as ``EvictionREST.Create`` does it
(``pkg/registry/core/pod/storage/eviction.go``).

* The Eviction's name must be the pod's (400); its ``deleteOptions`` (UID/resourceVersion preconditions,
  grace period, dryRun) apply to the pod's deletion; a dryRun in the query and a different one in the
  body is a 400.
* A Pending, Succeeded or Failed pod, or one already being deleted, is deleted without looking at
  PodDisruptionBudgets.
* Otherwise the PDBs of the pod's namespace whose selector matches it decide: more than one is a 500;
  an unready pod is deleted without using the budget when the PDB's ``unhealthyPodEvictionPolicy`` is
  AlwaysAllow or the budget is met anyway (IfHealthyBudget, the default); else the budget must allow it.
  ``observedGeneration`` behind ``generation`` is a 429 (Retry-After 10), ``disruptionsAllowed == 0`` a
  429 naming the budget, a negative one a 403; an allowed eviction decrements ``disruptionsAllowed`` and
  records the pod in ``disruptedPods`` (not for a dry run, which deletes nothing either).
* Success is a 201 Success Status; the pod is then deleted as a DELETE would (graceful for a pod on a
  node). :meth:`APIServer.evictions_answer_429` still forces the 429 of a blocking budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.apiserver import disruption, status
from tests.apiserver.status import APIError
from tests.apiserver.writes import now_rfc3339

if TYPE_CHECKING:
    from tests.apiserver.server import APIServer

Obj = dict[str, Any]
Reply = tuple[int, Any]
MAX_DISRUPTED_PODS = 2000
PDBS = "poddisruptionbudgets.policy"
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


def too_many(cause: str, retry_after: int = 0) -> APIError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = None
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers = {"Retry-After": str(retry_after)}
    return APIError(429, TOO_MANY, details=details, headers=headers)


def evict(api: APIServer, namespace: str, name: str, body: Any, *, dry_run: bool) -> Reply:
    if not isinstance(body, dict):
        raise status.bad_request("an Eviction body is required")
    if (body.get("metadata") or {}).get("name") != name:
        raise status.bad_request("name in URL does not match name in Eviction object")
    opts = body.get("deleteOptions") or {}
    if dry_run and opts.get("dryRun") and opts["dryRun"] != ["All"]:
        raise status.bad_request("Non-matching dry-run options in request and content")
    dry = dry_run or bool(opts.get("dryRun"))
    pre = opts.get("preconditions") or {}
    uid, rv = pre.get("uid"), pre.get("resourceVersion")
    store = api.store
    with store.lock:
        pod = store.get("pods", name, namespace)
        if api.evictions_blocked:
            raise too_many("The disruption budget test-pdb needs 1 healthy pods and has 1 currently")
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        if phase in ("Pending", "Succeeded", "Failed") or deleting:
            if phase == "Pending" and not deleting and rv is None:
                rv = pod["metadata"]["resourceVersion"]  # it must not have become ready meanwhile
        else:
            pdbs = [p for p in store.list(PDBS, namespace)[0] if disruption.selects(p, pod)]
            if len(pdbs) > 1:
                return 500, status.status_body(500, "", MULTIPLE_PDBS)
            if pdbs and _unhealthy_may_go(pdbs[0], pod):
                rv = rv or pod["metadata"]["resourceVersion"]
            elif pdbs:
                _check_and_decrement(api, pdbs[0], name, dry)
        store.delete(
            "pods",
            name,
            namespace,
            uid=uid,
            resource_version=rv,
            grace_period_seconds=opts.get("gracePeriodSeconds"),
            dry_run=dry,
        )
    return 201, status.status_body(201, "", "", success=True)


def _unhealthy_may_go(pdb: Obj, pod: Obj) -> bool:
    if disruption.pod_ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    st = pdb.get("status") or {}
    desired = int(st.get("desiredHealthy") or 0)
    return desired > 0 and int(st.get("currentHealthy") or 0) >= desired


def _check_and_decrement(api: APIServer, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    st, meta = pdb.get("status") or {}, pdb["metadata"]
    name = meta["name"]
    if int(st.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise too_many(
            f"The disruption budget {name} is still being processed by the server.", retry_after=10
        )
    allowed = int(st.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise status.forbidden("poddisruptionbudget", "policy", name, "pdb disruptions allowed is negative")
    if len(st.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        why = "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        raise status.forbidden("poddisruptionbudget", "policy", name, why)
    if allowed == 0:
        raise too_many(
            f"The disruption budget {name} needs {st.get('desiredHealthy', 0)} healthy pods "
            f"and has {st.get('currentHealthy', 0)} currently"
        )
    if dry_run:
        return
    now = now_rfc3339(api.store.clock)

    def decrement(current: Obj) -> Obj:
        cur = current.setdefault("status", {})
        cur["disruptionsAllowed"] = allowed - 1
        cur.setdefault("disruptedPods", {})[pod_name] = now
        disruption.set_allowed_condition(cur, now)
        return current

    api.store.guaranteed_update(PDBS, name, meta["namespace"], decrement)
