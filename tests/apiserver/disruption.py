"""A PodDisruptionBudget status controller inside the test API server (kube-controller-manager's
disruption controller, ``pkg/controller/disruption/disruption.go``, made synchronous).

After every write of a pod or a PDB, the PDBs it concerns are recomputed at once, in the store lock, and
their status written through the status subresource path (a MODIFIED event with a new resourceVersion)
when it changed:

* the pods are those of the PDB's namespace its ``spec.selector`` matches (policy/v1: a null selector
  matches none, ``{}`` matches all);
* ``currentHealthy`` counts those that are Ready, not being deleted and not in ``disruptedPods``;
* ``expectedPods`` and ``desiredHealthy``: with an integer ``minAvailable``, the number of matching pods
  and that integer (as upstream). With a percentage ``minAvailable`` or any ``maxUnavailable`` upstream
  scales by the replicas of the pods' controllers; this server has no workload controllers, so it
  scales by the number of matching pods instead (the same number when every replica exists);
* ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`` (0 while no pod matches);
* ``disruptedPods`` keeps an eviction's entry until the pod is deleting or 2 minutes pass;
* ``observedGeneration`` follows the PDB's generation, and the ``DisruptionAllowed`` condition is set.

:meth:`DisruptionController.pause` stops it (a controller that lags: observedGeneration falls behind and
evictions get 429); :meth:`resume` catches up. Being synchronous, it never lags otherwise, and an entry
of ``disruptedPods`` expires only when something is next written (or :meth:`sync_all` is called).
"""

from __future__ import annotations

import datetime
import math
import threading
from typing import Any

from tests.apiserver.selectors import label_selector
from tests.apiserver.store import Store
from tests.apiserver.watch import WatchEvent
from tests.apiserver.writes import now_rfc3339

Obj = dict[str, Any]
PODS, PDBS = ("", "pods"), ("policy", "poddisruptionbudgets")
DELETION_TIMEOUT = 120.0


def pod_ready(pod: Obj) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def selects(pdb: Obj, pod: Obj) -> bool:
    if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    reqs = label_selector((pdb.get("spec") or {}).get("selector"))
    if reqs is None:
        return False
    labels = pod["metadata"].get("labels") or {}
    return all(r.matches(labels) for r in reqs)


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _parse(ts: str) -> float:
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class DisruptionController:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._paused = False
        self._busy = threading.local()
        store.add_listener(self._on_write)

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self.sync_all()

    def sync_all(self) -> None:
        with self.store.lock:
            for pdb in self.store.list("poddisruptionbudgets.policy")[0]:
                self.sync(pdb["metadata"]["namespace"], pdb["metadata"]["name"])

    def _on_write(self, event: WatchEvent) -> None:
        if self._paused or getattr(self._busy, "on", False) or event.key not in (PODS, PDBS):
            return
        self._busy.on = True
        try:
            if event.key == PDBS:
                if event.type != "DELETED":
                    self.sync(event.obj["metadata"]["namespace"], event.obj["metadata"]["name"])
                return
            ns = event.obj["metadata"].get("namespace", "")
            for pdb in self.store.list("poddisruptionbudgets.policy", ns)[0]:
                if selects(pdb, event.obj) or (event.old is not None and selects(pdb, event.old)):
                    self.sync(ns, pdb["metadata"]["name"])
        finally:
            self._busy.on = False

    def sync(self, namespace: str, name: str) -> None:
        """Recompute one PDB's status now (the controller's ``trySync``)."""
        pdb = self.store.get("poddisruptionbudgets.policy", name, namespace)
        pods = [p for p in self.store.list("pods", namespace)[0] if selects(pdb, p)]
        now = self.store.clock()
        spec, old = pdb.get("spec") or {}, pdb.get("status") or {}
        disrupted = {
            pod["metadata"]["name"]: ts
            for pod in pods
            if not pod["metadata"].get("deletionTimestamp")
            and (ts := (old.get("disruptedPods") or {}).get(pod["metadata"]["name"]))
            and _parse(ts) + DELETION_TIMEOUT > now
        }
        healthy = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
            and pod_ready(p)
        )
        expected = len(pods)
        if spec.get("maxUnavailable") is not None:
            desired = max(expected - _scaled(spec["maxUnavailable"], expected), 0)
        elif spec.get("minAvailable") is not None:
            desired = _scaled(spec["minAvailable"], expected)
        else:
            desired = 0
        allowed = healthy - desired if expected > 0 and healthy > desired else 0
        new_status: Obj = {
            **old,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }
        if disrupted:
            new_status["disruptedPods"] = disrupted
        else:
            new_status.pop("disruptedPods", None)
        set_allowed_condition(new_status, now_rfc3339(self.store.clock))
        if new_status != old:

            def write(current: Obj) -> Obj:
                current["status"] = new_status
                return current

            self.store.guaranteed_update("poddisruptionbudgets.policy", name, namespace, write)


def set_allowed_condition(pdb_status: Obj, now: str) -> None:
    """``UpdateDisruptionAllowedCondition`` (``component-helpers/apps/poddisruptionbudget``)."""
    allowed = int(pdb_status.get("disruptionsAllowed") or 0) > 0
    value, reason = ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
    conditions = [c for c in pdb_status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
    before = [c for c in pdb_status.get("conditions") or () if c.get("type") == "DisruptionAllowed"]
    cond = {
        "type": "DisruptionAllowed",
        "status": value,
        "reason": reason,
        "message": "",
        "observedGeneration": pdb_status.get("observedGeneration", 0),
        "lastTransitionTime": now,
    }
    if before and before[0].get("status") == value:
        cond["lastTransitionTime"] = before[0].get("lastTransitionTime", now)
    pdb_status["conditions"] = [*conditions, cond]
