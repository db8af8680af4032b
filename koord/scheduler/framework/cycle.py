"""Filter and Score over many nodes (kube-scheduler's ``findNodesThatPassFilters`` and
``prioritizeNodes``), the framework's hot path.

Filter: batch plugins (``filter_nodes``) first, each over the nodes still feasible, as vector operations;
then the node-by-node plugins over the survivors in search order, stopping once ``want`` nodes passed
(``percentageOfNodesToScore``). The set of feasible nodes is exactly kube-scheduler's; a node two plugins
reject is reported with the batch plugin's reason even when a node-by-node plugin comes first in the
profile. Why each node failed is worked out only when asked (:meth:`FilterResult.statuses`): a batch
plugin that answered with a boolean array is then asked ``filter`` for the rejected nodes. A node with
pods nominated to it ahead of this pod (preemptors waiting for their victims to leave) is filtered node
by node, with and without them (:func:`filter_with_nominated_pods`); without nominations the search
pays nothing for this.

Score: PreScore (a SKIP takes that plugin's score out), then each Score plugin's scores after its
NormalizeScore (``normalize_scores`` on an array, or ``normalize_score`` on a dict), checked to be in
0..100, weighted and summed per node.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from koord.scheduler.framework.codedverdicts import CodedVerdicts
from koord.scheduler.framework.filterresult import FilterResult
from koord.scheduler.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, Code, CycleState, Status
from koord.scheduler.framework.pointtiming import extension_point
from koord.scheduler.framework.runtime import Enabled, PluginFailure, call
from koord.scheduler.framework.snapshot import NodeSet
from koord.scheduler.framework.types import NodeInfo, Obj, PodInfo

if TYPE_CHECKING:
    from koord.scheduler.framework.runtime import Framework


FEW_STATUSES = 32
"""Up to this many distinct Status objects in a batch answer, the nodes each rejects are kept as one array
(:attr:`FilterResult.grouped`); beyond, node by node."""


def _check(plugin: str, node: str, st: Any) -> Status:
    if not isinstance(st, Status):
        raise PluginFailure(plugin, "filter", f"node {node}: returned {st!r}, want a Status or None")
    if st.code is Code.ERROR:
        raise PluginFailure(plugin, "filter", f"node {node}: {st.message or 'error'}")
    if st.code is Code.SKIP:
        raise PluginFailure(plugin, "filter", f"node {node}: Skip is not a filter answer")
    return st


def find_feasible(
    fw: Framework, state: CycleState, pod: Obj, nodes: NodeSet, want: int | None = None
) -> FilterResult:
    """The first ``want`` feasible nodes of ``nodes`` in order (all of them when ``want`` is None)."""
    plugins = [e for e in fw.points.get("filter", ()) if e.name not in state.skip_filter]
    n = len(nodes)
    alive = np.ones(n, dtype=bool)
    result = FilterResult(nodes, nodes, n, state, pod, plugins)
    # Nodes with nominated pods ahead of this one are filtered node by node, twice (rare: preemption).
    ahead = nominated_ahead(fw, state, pod)
    if fw.extensions.filter:
        # BeforeFilter may change what a node holds for this pod: such nodes are judged one by one on the
        # transformed NodeInfo (the snapshot's arrays do not know it); the others as usual.
        changed: dict[int, tuple[Obj, NodeInfo]] = {}
        for pos, ni in enumerate(nodes):
            p2, ni2, did = fw.extensions.before_filter(state, pod, ni)
            if did:
                changed[pos] = (p2, ni2)
        if changed:
            return _with_transformed(fw, state, pod, nodes, want, plugins, changed, ahead)
    nominated = _positions(nodes, ahead) if ahead else None
    if nominated is not None:
        alive &= ~nominated
    per_node: list[tuple[int, Enabled]] = []
    for pi, e in enumerate(plugins):
        batch = getattr(e.plugin, "filter_nodes", None)
        if batch is None:
            per_node.append((pi, e))
            continue
        cand = np.nonzero(alive)[0]
        if not len(cand):
            break
        sub = nodes if len(cand) == n else nodes.subset(alive)
        start = time.perf_counter()
        try:
            answer = batch(state, pod, sub)
        except PluginFailure:
            raise
        except Exception as err:
            raise PluginFailure(e.name, "filter", repr(err)) from err
        fw.timed(e.name, "filter", start)
        if isinstance(answer, np.ndarray):
            if answer.shape != (len(cand),):
                raise PluginFailure(e.name, "filter", f"answered {answer.shape} for {len(cand)} nodes")
            rejected = cand[~answer]
            if len(rejected):
                result.rejected.append((pi, rejected))
                alive[rejected] = False
            continue
        if isinstance(answer, CodedVerdicts):
            _coded(result, pi, e.name, answer, sub, cand, alive)
            continue
        answers = answer if isinstance(answer, list) else list(answer)
        if len(answers) != len(cand):
            raise PluginFailure(
                e.name, "filter", f"filter_nodes answered {len(answers)} of {len(cand)} nodes"
            )
        # Thousands of answers, a handful of distinct Status objects: each distinct one is checked once,
        # and the nodes it rejects are found with array operations.
        ids = np.fromiter(map(id, answers), dtype=np.intp, count=len(answers))
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        said: list[Status | None] = []
        for at in first.tolist():
            st = answers[at]
            ok = st is None or (isinstance(st, Status) and st.code is Code.SUCCESS)
            said.append(None if ok else _check(e.name, sub.info(at).name, st))
        if len(first) <= FEW_STATUSES:
            for k, checked in enumerate(said):
                if checked is not None:
                    positions = cand[inverse == k]
                    result.grouped.append((pi, checked, positions))
                    alive[positions] = False
            continue
        # Many distinct statuses (a plugin that words each node's reason): node by node, at C level.
        per_node_verdicts = list(map(said.__getitem__, inverse.tolist()))
        failing = [k for k, v in enumerate(per_node_verdicts) if v is not None]
        positions_list = cand[failing].tolist()
        result.failed.update(zip(positions_list, [(pi, per_node_verdicts[k]) for k in failing], strict=True))
        alive[positions_list] = False
    index = {e.name: pi for pi, e in enumerate(plugins)}
    special = set() if nominated is None else set(np.nonzero(nominated)[0].tolist())
    if not per_node:
        for pos in special:  # a few nodes: settle them here and keep the vector path
            ni = nodes.info(pos)
            st = filter_with_nominated_pods(fw, state, pod, ni, ahead[ni.name])
            if st is None:
                alive[pos] = True
            else:
                result.failed[pos] = (index[st.plugin], st)
        survivors = np.nonzero(alive)[0]
        taken = survivors if want is None else survivors[:want]
        result.feasible = nodes.subset(_mask(n, taken))
        if want is not None and len(taken) == want:
            result.processed = int(taken[-1]) + 1
        return result
    survivors = np.nonzero(alive)[0]
    if special:
        survivors = np.union1d(survivors, np.asarray(sorted(special), dtype=np.int64))
    infos = nodes.infos
    keep: list[int] = []
    for pos in survivors.tolist():
        ni = infos[pos]
        if pos in special:
            st = filter_with_nominated_pods(fw, state, pod, ni, ahead[ni.name])
            verdict = None if st is None else (index[st.plugin], st)
        else:
            verdict = _first_rejection(per_node, state, pod, ni)
        if verdict is not None:
            result.failed[pos] = verdict
            continue
        keep.append(pos)
        if want is not None and len(keep) >= want:
            result.processed = pos + 1
            break
    result.feasible = nodes.subset(_mask(n, np.asarray(keep, dtype=np.int64)))
    return result


def _coded(
    result: FilterResult,
    pi: int,
    plugin: str,
    answer: CodedVerdicts,
    sub: NodeSet,
    cand: np.ndarray,
    alive: np.ndarray,
) -> None:
    """A coded batch answer into ``result``: each failing code's nodes found with one comparison."""
    codes = np.asarray(answer.codes)
    if codes.shape != (len(cand),):
        raise PluginFailure(plugin, "filter", f"answered {codes.shape} codes for {len(cand)} nodes")
    for k, st in enumerate(answer.statuses):
        if st is None or (isinstance(st, Status) and st.code is Code.SUCCESS):
            continue
        at = np.flatnonzero(codes == k)
        if len(at):
            checked = _check(plugin, sub.info(int(at[0])).name, st)
            positions = cand[at]
            result.grouped.append((pi, checked, positions))
            alive[positions] = False


def _first_rejection(
    per_node: list[tuple[int, Enabled]], state: CycleState, pod: Obj, ni: NodeInfo
) -> tuple[int, Status] | None:
    for pi, e in per_node:
        st = call(e.name, "filter", e.plugin.filter, state, pod, ni)
        if st is not None and not (isinstance(st, Status) and st.code is Code.SUCCESS):
            return pi, _check(e.name, ni.name, st)
    return None


def _with_transformed(
    fw: Framework,
    state: CycleState,
    pod: Obj,
    nodes: NodeSet,
    want: int | None,
    plugins: list[Enabled],
    changed: dict[int, tuple[Obj, NodeInfo]],
    ahead: Mapping[str, list[PodInfo]],
) -> FilterResult:
    """Every node node by node (plugins in order), the transformed ones with their transformed pod and
    NodeInfo, those with nominated pods ahead twice; stops once ``want`` nodes passed."""
    result = FilterResult(nodes, nodes, len(nodes), state, pod, plugins)
    index = {e.name: pi for pi, e in enumerate(plugins)}
    every = list(enumerate(plugins))
    keep: list[int] = []
    for pos, ni in enumerate(nodes):
        p, info = changed.get(pos, (pod, ni))
        if info.name in ahead:
            st = filter_with_nominated_pods(fw, state, p, info, ahead[info.name])
            rejected = None if st is None else (index[st.plugin], st)
        else:
            rejected = _first_rejection(every, state, p, info)
        if rejected is not None:
            result.failed[pos] = rejected
            continue
        keep.append(pos)
        if want is not None and len(keep) >= want:
            result.processed = pos + 1
            break
    result.feasible = nodes.subset(_mask(len(nodes), np.asarray(keep, dtype=np.int64)))
    return result


def _mask(n: int, positions: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[positions] = True
    return mask


def _positions(nodes: NodeSet, names: Mapping[str, object]) -> np.ndarray | None:
    """Where the nodes named in ``names`` are in ``nodes`` (``None`` when none of them is)."""
    snapshot, rows = nodes.snapshot, nodes.rows
    if snapshot is not None and rows is not None:
        wanted = [r for name in names if (r := snapshot.index.get(name)) is not None]
        mask = np.isin(rows, np.asarray(wanted, dtype=np.int64))
    else:
        mask = np.fromiter((ni.name in names for ni in nodes), dtype=bool, count=len(nodes))
    return mask if mask.any() else None


def nominated_ahead(fw: Framework, state: CycleState, pod: Obj) -> Mapping[str, list[PodInfo]]:
    """Node -> the pods nominated there of ``pod``'s priority or higher (empty without nominations)."""
    nominator = fw.nominator
    if nominator is None or not len(nominator):
        return {}
    return nominator.for_pod(state.pod_info if state.pod_info is not None else PodInfo(pod))


def filter_with_nominated_pods(
    fw: Framework, state: CycleState, pod: Obj, node: NodeInfo, ahead: Sequence[PodInfo]
) -> Status | None:
    """kube-scheduler's ``RunFilterPluginsWithNominatedPods``: with pods nominated to the node ahead of
    this one (``ahead``), the filters run first with them counted on the node (this pod must not take
    the room freed for them), then, if that passes, without them (they may land elsewhere, and some
    filters, such as pod affinity, pass only with them gone). The node fits when both pass."""
    if ahead:
        with_state, with_node = state.clone(), node.clone()
        added = False
        for pi in ahead:
            if pi.uid in with_node.pods:
                continue
            with_node.add_pod(pi)
            added = True
            st = fw.run_pre_filter_extension_add_pod(with_state, pod, pi, with_node)
            if st is not None:
                raise PluginFailure(st.plugin, "preFilter", st.message)
        if added:
            st = run_filter_plugins(fw, with_state, pod, with_node)
            if st is not None:
                return st
    return run_filter_plugins(fw, state, pod, node)


def filter_one(fw: Framework, state: CycleState, pod: Obj, node: NodeInfo) -> Status | None:
    """Every Filter plugin (not skipped) on one node as the cycle runs them (with the pods nominated
    there, see :func:`filter_with_nominated_pods`): the first rejection, or ``None``."""
    ahead = nominated_ahead(fw, state, pod).get(node.name, ())
    return filter_with_nominated_pods(fw, state, pod, node, ahead)


def run_filter_plugins(fw: Framework, state: CycleState, pod: Obj, node: NodeInfo) -> Status | None:
    """Every Filter plugin (not skipped) on one node as it is, node by node: the first rejection."""
    for e in fw.points.get("filter", ()):
        if e.name in state.skip_filter:
            continue
        st = call(e.name, "filter", e.plugin.filter, state, pod, node)
        if st is not None and not (isinstance(st, Status) and st.code is Code.SUCCESS):
            return _check(e.name, node.name, st).with_plugin(e.name)
    return None


@extension_point("PreScore")
def run_pre_score(fw: Framework, state: CycleState, pod: Obj, nodes: Sequence[NodeInfo]) -> None:
    """PreScore plugins in order; a SKIP takes that plugin's score out (``state.skip_score``)."""
    state.skip_score = set()
    for e in fw.points.get("preScore", ()):
        start = time.perf_counter()
        st = call(e.name, "preScore", e.plugin.pre_score, state, pod, nodes)
        fw.timed(e.name, "preScore", start)
        if st is not None and st.code is Code.SKIP:
            state.skip_score.add(e.name)
        elif st is not None and not st.is_success:
            raise PluginFailure(e.name, "preScore", st.message or st.code.name)


@extension_point("Score")
def plugin_scores(
    fw: Framework, state: CycleState, pod: Obj, nodes: NodeSet
) -> list[tuple[Enabled, np.ndarray]]:
    """Each Score plugin not skipped, with its scores after NormalizeScore, in node order."""
    out: list[tuple[Enabled, np.ndarray]] = []
    for e in fw.points.get("score", ()):
        if e.name in state.skip_score:
            continue
        start = time.perf_counter()
        values = _score_one(e, state, pod, nodes)
        fw.timed(e.name, "score", start)
        if len(values) and (values.min() < MIN_NODE_SCORE or values.max() > MAX_NODE_SCORE):
            bad = int(np.nonzero((values < MIN_NODE_SCORE) | (values > MAX_NODE_SCORE))[0][0])
            raise PluginFailure(
                e.name, "score", f"node {nodes[bad].name}: score {values[bad]} outside 0..{MAX_NODE_SCORE}"
            )
        out.append((e, values))
    return out


def _score_one(e: Enabled, state: CycleState, pod: Obj, nodes: NodeSet) -> np.ndarray:
    batch = getattr(e.plugin, "score_nodes", None)
    name = ""
    try:
        if batch is not None:
            values = np.asarray(batch(state, pod, nodes), dtype=np.int64)
            if values.shape != (len(nodes),):
                raise ValueError(f"score_nodes answered {values.shape} for {len(nodes)} nodes")
        else:
            fn = e.plugin.score
            raw = []
            for ni in nodes:
                name = ni.name
                raw.append(int(fn(state, pod, ni)))
            values = np.asarray(raw, dtype=np.int64)
    except PluginFailure:
        raise
    except Exception as err:
        where = f"node {name}: " if name else ""
        raise PluginFailure(e.name, "score", f"{where}{err!r}") from err
    vector = getattr(e.plugin, "normalize_scores", None)
    if vector is not None:
        return np.asarray(call(e.name, "normalizeScore", vector, state, pod, values), dtype=np.int64)
    normalize = getattr(e.plugin, "normalize_score", None)
    if normalize is None:
        return values
    scores = dict(zip(nodes.names, values.tolist(), strict=True))
    st = call(e.name, "normalizeScore", normalize, state, pod, scores)
    if st is not None and not st.is_success:
        raise PluginFailure(e.name, "normalizeScore", st.message or st.code.name)
    return np.asarray([int(scores[n]) for n in nodes.names], dtype=np.int64)


def weighted_total(scores: list[tuple[Enabled, np.ndarray]], count: int) -> np.ndarray:
    """``sum of weight * score`` per node (kube-scheduler's total score)."""
    total = np.zeros(count, dtype=np.int64)
    for e, values in scores:
        total += e.weight * values
    return total


def select_host(nodes: NodeSet, totals: np.ndarray, rng: np.random.Generator) -> int:
    """The position of the highest total, ties broken at random (kube-scheduler's ``selectHost``)."""
    if len(totals) == 1:
        return 0
    best = np.flatnonzero(totals == totals.max())
    return int(best[0] if len(best) == 1 else best[rng.integers(len(best))])
