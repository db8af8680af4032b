"""Writes to the store as the generic registry store makes them (``apiserver/pkg/registry/generic/
registry/store.go``): create, update (PUT), patch, GuaranteedUpdate and delete.

A write decodes the body into the storage shape (unknown fields dropped per ``fieldValidation``, see
:mod:`tests.apiserver.fieldvalidation`; 400 if it does not decode), applies the type's defaults, update
admission and strategy (:mod:`tests.apiserver.strategy`), checks ``metadata.uid``/``resourceVersion``
preconditions (409) and the update rules, validates (422), checks custom resources against their CRD
schema, then commits unless it is a dry run. Deletion follows :mod:`tests.apiserver.deletion`.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.apiserver import deletion, events, fieldvalidation, patch, status
from tests.apiserver import validation as validation_checks
from tests.apiserver.resources import ResourceType
from tests.apiserver.strategy import Strategy, for_key

Obj = dict[str, Any]
_SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "name",
    "namespace",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteOptions:
    """``metav1.DeleteOptions`` as far as the store acts on them."""

    uid: str | None = None
    resource_version: str | None = None
    grace_period_seconds: int | None = None
    dry_run: bool = False


def now_rfc3339(clock: Callable[[], float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


def _body(obj: Obj) -> Obj:
    """Everything a generation bump looks at: all but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Writes:
    """The write half of :class:`tests.apiserver.store.Store` (which provides what is declared here)."""

    _lock: threading.RLock
    clock: Callable[[], float]

    def resolve(self, resource: ResourceType | str) -> ResourceType:
        raise NotImplementedError

    def _ns(self, rt: ResourceType, namespace: str | None, obj: Obj | None = None) -> str:
        raise NotImplementedError

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        raise NotImplementedError

    def _current(self, rt: ResourceType, ns: str, name: str) -> Obj:
        raise NotImplementedError

    def _commit(self, rt: ResourceType, typ: str, obj: Obj, old: Obj | None) -> Obj:
        raise NotImplementedError

    def _admit(self, rt: ResourceType, obj: Obj, name: str) -> None:
        """A custom resource must pass its CRD's schema (422 Invalid otherwise)."""
        causes = rt.schema_errors(obj, strict=False)
        if causes:
            raise status.invalid(rt.kind, rt.group, name, causes)

    def _decode(self, rt: ResourceType, strat: Strategy, obj: Obj, validation: str) -> Obj:
        """What the server decodes a body of ``rt`` into: known fields only (``validation`` is the
        fieldValidation directive), storage shape, decode checks, defaults."""
        known = fieldvalidation.admit(rt, obj, validation)
        stored = events.to_storage(rt, known)
        validation_checks.refuse_undecodable(rt.kind, rt.version, strat.decode_problems(stored))
        strat.defaults(stored)
        return stored

    def create(
        self,
        resource: ResourceType | str,
        obj: Obj,
        namespace: str | None = None,
        *,
        keep_status: bool = True,
        validation: str = "Ignore",
        dry_run: bool = False,
        corrupt: bool = False,
    ) -> Obj:
        """Store a new object (409 AlreadyExists if taken). ``keep_status=False`` is an API create: the
        type's strategy drops what a create may not set (``.status`` of most types with a status
        subresource); a test seeding a complete object keeps it. Unknown fields are dropped;
        ``validation`` (fieldValidation: Ignore, Warn, Strict) says whether that is said or refused.
        ``corrupt``: stored as given, without decoding, defaults or validation (a test's stand-in for an
        object kube-apiserver would refuse that a client must still survive reading from a watch)."""
        rt = self.resolve(resource)
        strat = for_key(rt.key)
        new = copy.deepcopy(obj) if corrupt else self._decode(rt, strat, copy.deepcopy(obj), validation)
        meta = new.setdefault("metadata", {})
        with self._lock:
            ns = self._ns(rt, namespace, new)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise _required(rt, "metadata.name", "name or generateName is required")
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            name = meta["name"]
            if meta.get("resourceVersion") not in (None, ""):
                # etcd3 storage refuses this, and kube-apiserver answers it as an internal error.
                raise status.internal("resourceVersion should not be set on objects to be created")
            if (ns, name) in self._bucket(rt):
                raise status.already_exists(rt.plural, rt.group, name)
            if rt.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            if not keep_status and rt.status_subresource and not strat.status_on_create:
                new.pop("status", None)
            strat.prepare_for_create(new, keep_status=keep_status)
            new["apiVersion"], new["kind"] = events.storage_api_version(rt), rt.kind
            for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(field, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339(self.clock)
            meta["generation"] = 1
            if not corrupt:
                causes = strat.name_problems(name) + validation_checks.meta_errors(new)
                _check(rt, name, causes + strat.validate(new))
            self._admit(rt, new, name)
            if dry_run:
                return events.from_storage(rt, new)
            return events.from_storage(rt, self._commit(rt, "ADDED", new, None))

    def update(
        self,
        resource: ResourceType | str,
        obj: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        require_resource_version: bool | None = None,
        validation: str = "Ignore",
        dry_run: bool = False,
        admit: Callable[[Obj, Obj], Obj] | None = None,
    ) -> Obj:
        """Replace an object (PUT semantics).

        A ``metadata.resourceVersion`` or ``metadata.uid`` that is not the current one is a 409 Conflict;
        omitting the resourceVersion is a 422 for types that refuse unconditional updates (Leases,
        PodDisruptionBudgets, custom resources; ``require_resource_version`` overrides). On a resource
        with a status subresource, a main write keeps the stored ``.status`` and ``subresource="status"``
        changes only ``.status``. An update that changes nothing writes nothing (no new revision). A PUT
        of a missing Lease or Event creates it, as those strategies allow. ``admit`` is update admission:
        given the new and the old object (stored shape) before the strategy runs, it returns the object to
        write or raises to refuse.
        """
        rt = self.resolve(resource)
        strat = for_key(rt.key)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise status.bad_request("name is required in metadata")
        if subresource not in (None, "status") or (subresource == "status" and not rt.status_subresource):
            raise status.APIError(404, f"the server could not find the requested resource ({subresource})")
        with self._lock:
            ns = self._ns(rt, namespace, obj)
            if (ns, name) not in self._bucket(rt) and strat.allow_create_on_update and subresource is None:
                if meta.get("resourceVersion") not in (None, ""):
                    raise status.not_found(rt.plural, rt.group, name)
                return self.create(
                    rt, obj, ns or None, keep_status=False, validation=validation, dry_run=dry_run
                )
            old = self._current(rt, ns, name)
            self._preconditions(rt, old, meta, require_resource_version)
            new = self._decode(rt, strat, copy.deepcopy(obj), validation)
            if subresource == "status":
                status_part = new.get("status")
                new = copy.deepcopy(old)
                if status_part is None:
                    new.pop("status", None)
                else:
                    new["status"] = status_part
            else:
                new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
                if rt.status_subresource:
                    new.pop("status", None)
                    if "status" in old:
                        new["status"] = copy.deepcopy(old["status"])
                new_meta = new.setdefault("metadata", {})
                for field in _SERVER_META:
                    if field in old["metadata"]:
                        new_meta[field] = old["metadata"][field]
                    else:
                        new_meta.pop(field, None)
            if admit is not None:
                new = admit(new, copy.deepcopy(old))
            strat.prepare_for_update(new, old, subresource)
            causes = validation_checks.meta_errors(new) + validation_checks.meta_update_errors(new, old)
            _check(rt, name, causes + strat.validate_update(new, old, subresource))
            self._admit(rt, new, name)
            if _body(new) != _body(old):  # compared after pruning: dropped unknown fields change nothing
                new["metadata"]["generation"] = int(old["metadata"].get("generation", 0)) + 1
            if new == old:
                return events.from_storage(rt, copy.deepcopy(old))
            if dry_run:
                return events.from_storage(rt, new)
            typ = "DELETED" if deletion.emptied(new) else "MODIFIED"
            return events.from_storage(rt, self._commit(rt, typ, new, copy.deepcopy(old)))

    def _preconditions(self, rt: ResourceType, old: Obj, meta: Obj, require: bool | None) -> None:
        name, have = old["metadata"]["name"], old["metadata"]
        given_rv, given_uid = meta.get("resourceVersion"), meta.get("uid")
        if given_uid not in (None, "") and given_uid != have["uid"]:
            why = f"Precondition failed: UID in precondition: {given_uid}, UID in object meta: {have['uid']}"
            raise status.conflict(rt.plural, rt.group, name, why)
        if given_rv in (None, ""):
            if (not rt.unconditional_update) if require is None else require:
                raise _required(rt, "metadata.resourceVersion", "0x0: must be specified for an update", name)
        elif str(given_rv) != have["resourceVersion"]:
            raise status.conflict(rt.plural, rt.group, name, status.STALE)

    def patch(
        self,
        resource: ResourceType | str,
        name: str,
        body: Any,
        content_type: str = patch.MERGE,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        validation: str = "Ignore",
        dry_run: bool = False,
        admit: Callable[[Obj, Obj], Obj] | None = None,
    ) -> Obj:
        """Apply a PATCH atomically (the real server's GuaranteedUpdate). A patch that sets
        ``metadata.resourceVersion`` (or ``uid``) makes it a precondition (409 when stale)."""
        rt = self.resolve(resource)
        with self._lock:
            ns = self._ns(rt, namespace)
            current = events.from_storage(rt, copy.deepcopy(self._current(rt, ns, name)))
            patched = patch.apply(current, body, content_type, rt)
            meta = patched.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise status.bad_request("metadata must be an object")
            if meta.get("name") != name:
                raise status.bad_request("the name of a patched object cannot change")
            if meta.get("resourceVersion") in (None, ""):
                meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self.update(
                rt,
                patched,
                ns or None,
                subresource=subresource,
                validation=validation,
                dry_run=dry_run,
                admit=admit,
            )

    def guaranteed_update(
        self,
        resource: ResourceType | str,
        name: str,
        namespace: str | None,
        mutate: Callable[[Obj], Obj],
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Storage's GuaranteedUpdate: ``mutate`` gets a copy of the current (stored) object under the
        lock and returns the object to write as is (no strategy, no generation bump); it raises APIError
        to refuse. Subresources such as pods/binding and controllers' status writes go this way."""
        rt = self.resolve(resource)
        with self._lock:
            old = self._current(rt, self._ns(rt, namespace), name)
            new = mutate(copy.deepcopy(old))
            if new == old or dry_run:
                return copy.deepcopy(new)
            return self._commit(rt, "MODIFIED", new, copy.deepcopy(old))

    def delete(
        self,
        resource: ResourceType | str,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """DELETE with DeleteOptions: ``uid``/``resource_version`` preconditions (409) and the grace
        period. Returns the object as last stored (see :meth:`delete_ex` for whether it is gone)."""
        options = DeleteOptions(uid, resource_version, grace_period_seconds, dry_run)
        return self.delete_ex(resource, name, namespace, options)[0]

    def delete_ex(
        self, resource: ResourceType | str, name: str, namespace: str | None, options: DeleteOptions
    ) -> tuple[Obj, bool]:
        """Like :meth:`delete`; also says whether the object is gone (False: graceful deletion or
        finalizers keep it, with ``deletionTimestamp`` set)."""
        uid, resource_version = options.uid, options.resource_version
        grace_period_seconds, dry_run = options.grace_period_seconds, options.dry_run
        rt = self.resolve(resource)
        with self._lock:
            old = self._current(rt, self._ns(rt, namespace), name)
            have_uid, have_rv = old["metadata"]["uid"], old["metadata"]["resourceVersion"]
            if uid is not None and uid != have_uid:
                why = (
                    f"the UID in the precondition ({uid}) does not match the UID in record ({have_uid}). "
                    "The object might have been deleted and then recreated"
                )
                raise status.conflict(rt.plural, rt.group, name, why)
            if resource_version is not None and resource_version != have_rv:
                why = (
                    f"the ResourceVersion in the precondition ({resource_version}) does not match the "
                    f"ResourceVersion in record ({have_rv}). The object might have been modified"
                )
                raise status.conflict(rt.plural, rt.group, name, why)
            grace = for_key(rt.key).grace_period(old, grace_period_seconds)
            plan = deletion.plan(old, grace, grace_period_seconds, self.clock())
            current = copy.deepcopy(old)
            if plan.write is not None and plan.write != old:
                current = (
                    plan.write if dry_run else self._commit(rt, "MODIFIED", plan.write, copy.deepcopy(old))
                )
            if plan.remove and not dry_run:
                current = self._commit(rt, "DELETED", current, copy.deepcopy(current))
            return events.from_storage(rt, current), plan.remove


def _check(rt: ResourceType, name: str, causes: list[status.Cause]) -> None:
    if causes:
        raise status.invalid(rt.kind, rt.group, name, causes)


def _required(rt: ResourceType, field: str, message: str, name: str = "") -> status.APIError:
    return status.invalid(rt.kind, rt.group, name, [(field, message)])
