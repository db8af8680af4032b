"""The kubelet's part of pod deletion, for tests: confirm that a terminating pod's containers are gone.

In a cluster, deleting (or evicting) a pod that is on a node only sets ``deletionTimestamp``; the pod stays,
terminating, until that node's kubelet has stopped it and deletes it again with grace period 0 (the
status manager's final delete, with the pod's UID as precondition). No kubelet runs here, so a test plays
that part: :meth:`KubeletHook.confirm` for one pod, :meth:`confirm_all` for every terminating pod (of a
node), or ``auto=True`` to confirm each graceful deletion as soon as it starts (the pod is still seen
terminating first: a MODIFIED event, then DELETED).
"""

from __future__ import annotations

import threading
from typing import Any

from tests.apiserver.store import Store
from tests.apiserver.watch import WatchEvent

Obj = dict[str, Any]
PODS = ("", "pods")


class KubeletHook:
    def __init__(self, store: Store, *, auto: bool = False) -> None:
        self.store = store
        self.auto = auto
        self._local = threading.local()
        store.add_listener(self._on_write)

    def confirm(self, namespace: str, name: str) -> bool:
        """Finish the graceful deletion of one pod; False if it is not terminating (or gone)."""
        try:
            pod = self.store.get("pods", name, namespace)
        except Exception:
            return False
        if not pod["metadata"].get("deletionTimestamp"):
            return False
        self.store.delete("pods", name, namespace, uid=pod["metadata"]["uid"], grace_period_seconds=0)
        return True

    def confirm_all(self, node: str | None = None) -> list[str]:
        """Confirm every terminating pod (on ``node`` if given); returns their ``namespace/name``."""
        done = []
        for pod in self.store.list("pods")[0]:
            meta, spec = pod["metadata"], pod.get("spec") or {}
            mine = node is None or spec.get("nodeName") == node
            if mine and meta.get("deletionTimestamp") and self.confirm(meta["namespace"], meta["name"]):
                done.append(f"{meta['namespace']}/{meta['name']}")
        return done

    def terminating(self) -> list[str]:
        """``namespace/name`` of the pods waiting for a kubelet's confirmation."""
        return [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in self.store.list("pods")[0]
            if p["metadata"].get("deletionTimestamp")
        ]

    def _on_write(self, event: WatchEvent) -> None:
        if (
            not self.auto
            or event.key != PODS
            or event.type != "MODIFIED"
            or getattr(self._local, "busy", False)
        ):
            return
        meta = event.obj["metadata"]
        started = meta.get("deletionTimestamp") and not (event.old or {}).get("metadata", {}).get(
            "deletionTimestamp"
        )
        if not started or not meta.get("deletionGracePeriodSeconds"):
            return
        self._local.busy = True
        try:
            self.confirm(meta["namespace"], meta["name"])
        finally:
            self._local.busy = False
