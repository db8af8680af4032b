"""SchedulingHint: the pod's scheduling hint (``internal.scheduling.koordinator.sh/scheduling-hint``, or the
deprecated ``scheduling.koordinator.sh/scheduling-hint``; :mod:`koordshared.apis.extension.schedulinghint`)
steers the cycle:

- **BeforePreFilter** reads the annotation into the cycle state for the other plugins
  (:mod:`koord.scheduler.framework.hinter`); an annotation that is not the expected JSON fails the cycle
  with an error naming it (the pod is retried after a backoff, as in Koordinator).
- **PreFilter**: ``nodeNames`` (when not empty) is the only set of nodes the pod may go to.
- **PreferNodes**: ``preferredNodeNames``, cut to the first ``maxHintNodes`` and to the nodes PreFilter
  left, are tried in order before the usual search; the first that passes every filter takes the pod
  without scoring. None passing, or none left, and the pod is scheduled as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from koord.scheduler.framework import SKIP, CycleState, Obj, Status
from koord.scheduler.framework.hinter import SchedulingHintState, hint_state, set_hint_state
from koord.scheduler.framework.types import PreFilterResult
from koord.scheduler.plugins.schedulinghint.args import SchedulingHintArgs, parse_args
from koordshared.apis.core.pod import annotations_of
from koordshared.apis.extension.schedulinghint import scheduling_hint
from koordshared.runtime.errors import InvalidValue

NAME = "SchedulingHint"
log = logging.getLogger(__name__)


class SchedulingHint:
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None, handle: Any) -> None:
        self.args: SchedulingHintArgs = parse_args(args)

    def before_pre_filter(self, state: CycleState, pod: Obj) -> tuple[Obj, bool, Status | None]:
        try:
            hint = scheduling_hint(annotations_of(pod))
        except InvalidValue as err:
            return pod, False, Status.error(str(err))
        if hint is not None:
            set_hint_state(
                state, SchedulingHintState(hint.node_names, hint.preferred_node_names, hint.extensions)
            )
        return pod, False, None

    def after_pre_filter(self, state: CycleState, pod: Obj, result: PreFilterResult | None) -> Status | None:
        return None

    def pre_filter(self, state: CycleState, pod: Obj) -> PreFilterResult | None:
        hint = hint_state(state)
        if hint is None or not hint.pre_filter_nodes:
            return None
        return PreFilterResult(frozenset(hint.pre_filter_nodes))

    def prefer_nodes(
        self, state: CycleState, pod: Obj, result: PreFilterResult | None
    ) -> Sequence[str] | Status:
        hint = hint_state(state)
        if hint is None or not hint.preferred_nodes:
            return SKIP
        preferred = hint.preferred_nodes[: self.args.max_hint_nodes]
        allowed = None if result is None else result.node_names
        if allowed is not None:
            preferred = tuple(n for n in preferred if n in allowed)
            if not preferred:
                log.debug("SchedulingHint: the preferred nodes of %s are all left out by PreFilter", pod)
                return SKIP
        return preferred
