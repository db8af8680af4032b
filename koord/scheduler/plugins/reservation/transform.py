"""BeforePreFilter: which reservations the pod may use on which node, and the room they hold given back to
it (Koordinator's ``transformer.go``, with ``LazyReservationRestore`` off, its default). A node's restored
copy is kept and given again while its inputs are the same objects (the snapshot's NodeInfo and the
reservations' infos are replaced, never changed, when anything about them changes), so a cycle copies
only the nodes whose reservations or pods changed since; and a cycle of a pod shape seen before looks
only at those nodes, the others' outcome taken whole from that shape's last cycle (:mod:`.rounds`).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from koord.scheduler.framework import CycleState, NodeInfo, Obj, ReservationInfo, SchedulerHandle, Status
from koord.scheduler.framework.extension import ReservationHooks
from koord.scheduler.framework.types import PodInfo
from koord.scheduler.plugins.reservation import rounds
from koord.scheduler.plugins.reservation.cache import ReservationCache
from koord.scheduler.plugins.reservation.rounds import Round, Rounds
from koord.scheduler.plugins.reservation.state import CycleData, Diagnosis, NodeState
from koordshared.apis.core.node import matches_node_selector
from koordshared.apis.core.pod import as_list, as_map
from koordshared.apis.scheduling import reservation as rsv
from koordshared.apis.scheduling.reservation import reservation_name
from koordshared.runtime.errors import InvalidValue


@dataclass(frozen=True, slots=True)
class _Kept:
    """A node's restore and what it was made from (compared by identity: each is replaced on change)."""

    base: NodeInfo
    matched: tuple[ReservationInfo, ...]
    unmatched: tuple[ReservationInfo, ...]
    restored: NodeInfo
    state: NodeState
    """What Filter and Score read of the node: nothing changes it, so each cycle is given this one."""

    def made_of(
        self, base: NodeInfo, matched: Sequence[ReservationInfo], unmatched: Sequence[ReservationInfo]
    ) -> bool:
        # ReservationInfo compares by identity: a tuple comparison is one of objects, not of values.
        return self.base is base and self.matched == tuple(matched) and self.unmatched == tuple(unmatched)


@dataclass(frozen=True, slots=True)
class _Seen:
    """Which of a node's reservations a pod of ``shape`` matched, and why not: the same again for the same
    NodeInfo, reservations (by identity) and shape, when their owners read the pod's labels alone."""

    base: NodeInfo
    infos: tuple[ReservationInfo, ...]
    shape: tuple[object, ...] | None
    matched: tuple[ReservationInfo, ...]
    unmatched: tuple[ReservationInfo, ...]
    diag: Diagnosis


class Restorer:
    def __init__(self, handle: SchedulerHandle, cache: ReservationCache, hooks: ReservationHooks) -> None:
        self.handle = handle
        self.cache = cache
        self.hooks = hooks
        self._kept: dict[str, _Kept] = {}
        self._seen: dict[str, _Seen] = {}
        self.rounds = Rounds()
        # id(owners) -> (those owners, the pod labels, whether they match): kept for owners that read a
        # pod's labels alone, each under its own owners object (a reservation's stays while it does).
        self._owned: dict[int, tuple[tuple[rsv.OwnerMatcher, ...], frozenset[tuple[str, str]], bool]] = {}

    def prepare(self, state: CycleState, pod: Obj) -> CycleData | Status:
        name = reservation_name(pod)
        return self._for_reserve_pod(state, pod, name) if name else self._for_pod(state, pod)

    def _for_pod(self, state: CycleState, pod: Obj) -> CycleData | Status:
        try:
            affinity = rsv.reservation_affinity(pod)
            exact = rsv.exact_match_resources(pod)
        except InvalidValue as err:
            return Status.unresolvable(str(err))
        specific = specific_nodes(pod)
        if isinstance(specific, Status):
            return specific
        info = state.pod_info if state.pod_info is not None else PodInfo(pod)
        data = CycleData(
            has_affinity=affinity is not None,
            reservation_name=affinity.name if affinity is not None else "",
            ignored=rsv.is_ignored(pod),
            requests=dict(info.requests),
            exact=exact,
        )
        st = self.hooks.pre_restore(state, pod)
        if st is not None:
            return st
        snapshot = self.handle.snapshot()
        selects = specific is None and _selects_nodes(pod)
        labels = frozenset(as_map(as_map(pod, "metadata"), "labels").items())

        def owned(r: ReservationInfo) -> bool:
            return self._owns(r, pod, labels)

        # What of the pod the matching reads when no node-level term of the pod is involved (with owners
        # by labels alone: see _Seen).
        shape = None
        if affinity is None and specific is None and not selects:
            shape = (labels, data.ignored, exact, tuple(sorted(data.requests.items())) if exact else ())
        # The last cycle of the same shape (and requests, which Filter and Score read): only the nodes
        # changed since are examined again (other plugins' restores depend on the pod: nothing kept).
        key = None if shape is None or self.hooks.restorers else (shape, tuple(sorted(data.requests.items())))
        kept = self.rounds.get(key) if key is not None else None
        by_node, generation, moved = self.cache.by_node_since(kept.generation if kept is not None else -1)
        changes = kept.changed(snapshot, moved) if kept is not None else None
        nodes: Iterable[str]
        if kept is not None and changes is not None:
            changed, again = changes
            kept.forget(changed)
            shown = kept.restored.keys() - again if again else kept.restored.keys()
            for node in snapshot.keep_overlays(shown) | again:
                self.handle.replace_node_info(kept.restored[node])
            nodes = sorted(n for n in changed if n in by_node)
        else:
            kept = None if key is None else Round(snapshot, snapshot.layout)
            nodes = by_node
            if data.reservation_name:
                nodes = self._named(data.reservation_name) or nodes
        if kept is not None:
            data.nodes, data.diagnosis = kept.nodes, kept.diagnosis
            state.write(rounds.STATE_KEY, kept)
        for node in nodes:
            ni = snapshot.underneath(node)
            if ni is None or ni.node is None:
                continue
            if specific is not None and node not in specific:
                continue
            if selects and not matches_node_selector(pod, ni.node):
                continue
            infos = by_node.get(node, ())
            seen = self._seen.get(node)
            matched: Sequence[ReservationInfo]
            unmatched: Sequence[ReservationInfo]
            if seen is not None and seen.base is ni and seen.infos == infos and seen.shape == shape:
                matched, unmatched, diag = seen.matched, seen.unmatched, seen.diag
            else:
                diag = Diagnosis()
                yes: list[ReservationInfo] = []
                no: list[ReservationInfo] = []
                for r in infos:
                    if _matches(pod, r, diag, ni, data, affinity, owned):
                        yes.append(r)
                    elif r.allocated_pods:
                        no.append(r)
                matched, unmatched = tuple(yes), tuple(no)
                if shape is not None and all(_by_labels(r) for r in infos):
                    if len(self._seen) > 2 * max(len(by_node), 64):
                        self._seen.clear()  # nodes long gone
                    self._seen[node] = _Seen(ni, infos, shape, matched, unmatched, diag)
                elif kept is not None:
                    kept.volatile.add(node)  # owners that read more of the pod than the shape
            if diag.ignored or diag.owner_matched:
                data.diagnosis[node] = diag  # never changed after: shared with the kept one
            if not matched and (not unmatched or affinity is not None):
                continue
            restored = self._restore(state, pod, data, ni, matched, unmatched)
            if isinstance(restored, Status):
                return restored
            if kept is not None:
                kept.restored[node], kept.bases[node] = restored, ni
                if matched:
                    kept.unfit.add(node)
                    kept.unnominated.add(node)
        if kept is not None and key is not None:
            kept.written, kept.generation = snapshot.written, generation
            self.rounds.put(key, kept)
        return data

    def _owns(self, r: ReservationInfo, pod: Obj, labels: frozenset[tuple[str, str]]) -> bool:
        if r.parse_error:
            return False
        kept = self._owned.get(id(r.owners))
        if kept is not None and kept[0] is r.owners and kept[1] == labels:
            return kept[2]
        answer = r.match_owners(pod)
        if _by_labels(r):
            if len(self._owned) > 4 * max(len(self._kept), 64):
                self._owned.clear()  # reservations long gone
            self._owned[id(r.owners)] = (r.owners, labels, answer)
        return answer

    def _named(self, name: str) -> list[str]:
        store = self.handle.store("reservations")
        r = store.get(name) if store is not None else None
        return [rsv.node_of(r)] if r is not None and rsv.node_of(r) else []

    def _for_reserve_pod(self, state: CycleState, pod: Obj, name: str) -> CycleData | Status:
        store = self.handle.store("reservations")
        r = store.get(name) if store is not None else None
        if r is None:
            return Status.error(f"cannot get reservation {name}")
        problems = rsv.problems(r)
        if problems:
            return Status.unresolvable(f"reservation {name} cannot be used: {'; '.join(problems)}")
        data = CycleData(reserve=ReservationInfo.of(r))
        st = self.hooks.pre_restore(state, pod)
        if st is not None:
            return st
        snapshot = self.handle.snapshot()
        for node, infos in self.cache.by_node().items():
            ni = snapshot.underneath(node)
            if ni is None or ni.node is None:
                continue
            unmatched = [r for r in infos if r.allocated_pods]
            if unmatched:
                failed = self._restore(state, pod, data, ni, [], unmatched)
                if isinstance(failed, Status):
                    return failed
        return data

    def _restore(
        self,
        state: CycleState,
        pod: Obj,
        data: CycleData,
        ni: NodeInfo,
        matched: Sequence[ReservationInfo],
        unmatched: Sequence[ReservationInfo],
    ) -> NodeInfo | Status:
        """The room ``matched`` and ``unmatched`` hold on the node given back, as this cycle's row of it."""
        kept = self._kept.get(ni.name)
        if kept is not None and not self.hooks.restorers and kept.made_of(ni, matched, unmatched):
            self.handle.replace_node_info(kept.restored)
            data.nodes[ni.name] = kept.state
            return kept.restored
        node = ni.clone()
        for r in unmatched:
            for name, value in r.allocated.items():
                node.requested[name] = node.requested.get(name, 0) - value
            cpu, mem = r.non_zero_allocated()
            node.non_zero_cpu -= cpu
            node.non_zero_memory -= mem
        pod_requested = dict(node.requested)
        r_allocated: dict[str, int] = {}
        for r in matched:
            node.remove_pod(r.uid)  # a reserve pod not cached yet (an informer behind) holds nothing
            for name, value in r.allocated.items():
                r_allocated[name] = r_allocated.get(name, 0) + value
        ns = NodeState(ni.name, list(matched), list(unmatched), pod_requested, r_allocated)
        if self.hooks.restorers:  # their changes depend on the pod: nothing kept
            _, st = self.hooks.restore(state, pod, matched, unmatched, node)
            if st is not None:
                return st
        else:
            if len(self._kept) > 2 * max(len(self.cache.nodes()), 64):
                self._kept.clear()  # nodes long gone
            self._kept[ni.name] = _Kept(ni, tuple(matched), tuple(unmatched), node, ns)
        self.handle.replace_node_info(node)
        data.nodes[ni.name] = ns
        return node


def _matches(
    pod: Obj,
    r: ReservationInfo,
    diag: Diagnosis,
    ni: NodeInfo,
    data: CycleData,
    affinity: rsv.ReservationAffinity | None,
    owned: Callable[[ReservationInfo], bool],
) -> bool:
    """Koordinator's ``checkReservationMatchedOrIgnored``, counting why an owned one did not match."""
    if not r.is_matchable():
        return False
    if data.ignored:
        diag.ignored += 1
        return True
    if not owned(r):
        return False
    diag.owner_matched += 1
    exact = not data.exact or rsv.exact_match(data.requests, r.allocatable, data.exact)
    if data.reservation_name:
        if data.reservation_name != r.name:
            diag.name_unmatched += 1
        elif not exact:
            diag.not_exact += 1
        else:
            diag.name_matched += 1
            return True
        return False
    if r.is_unschedulable and not (affinity is not None and affinity.tolerates_unschedulable):
        diag.unschedulable += 1
        return False
    taint = affinity.untolerated(r.taints) if affinity is not None else None
    if taint is not None:
        diag.taints_unmatched += 1
        key = f"{{{taint.get('key')}: {taint.get('value') or ''}}}"
        diag.taints[key] = diag.taints.get(key, 0) + 1
        return False
    if affinity is not None and not affinity.matches(r.name, {**ni.labels, **r.labels}):
        diag.affinity_unmatched += 1
        return False
    if not exact:
        diag.not_exact += 1
        return False
    return True


def _by_labels(r: ReservationInfo) -> bool:
    """Whether the reservation's owners read a pod's labels alone (no object or controller)."""
    return all(o.object is None and o.controller is None for o in r.owners)


def _selects_nodes(pod: Obj) -> bool:
    spec = as_map(pod, "spec")
    return bool(spec.get("nodeSelector")) or bool(as_map(as_map(spec, "affinity"), "nodeAffinity"))


def specific_nodes(pod: Obj) -> set[str] | Status | None:
    """The nodes the pod's required node affinity names by ``metadata.name In`` in every term (Koordinator's
    ``parseSpecificNodesFromAffinity``); ``None`` when some term names none."""
    required = as_map(
        as_map(as_map(as_map(pod, "spec"), "affinity"), "nodeAffinity"),
        "requiredDuringSchedulingIgnoredDuringExecution",
    )
    terms = as_list(required, "nodeSelectorTerms")
    if not terms:
        return None
    out: set[str] = set()
    for term in terms:
        names: set[str] | None = None
        for req in as_list(term, "matchFields"):
            if isinstance(req, Mapping) and req.get("key") == "metadata.name" and req.get("operator") == "In":
                values = {str(v) for v in req.get("values") or ()}
                names = values if names is None else names & values
        if names is None:
            return None
        if not names:
            return Status.unresolvable("pod affinity terms conflict")
        out |= names
    return out
