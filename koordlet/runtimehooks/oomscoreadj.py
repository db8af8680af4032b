"""``OOMScoreAdj``: every process of a container gets the ``oom_score_adj`` its pod's annotations ask for
(Koordinator's ``hooks/oomscoreadj``).

``koordinator.sh/oom-score-adj-spec`` (``{"<container>": value}``) first, else ``koordinator.sh/
oom-score-adj`` (one value for the pod); values outside [-1000, 1000] or unparsable are refused (logged
once). Applied to every container of any class (sidecars included), never to the sandbox, whose value the
runtime manages; re-applied on every pass, so processes started later are covered. Removing the annotation
does not restore the old value (as in Koordinator). The executor writes ``/proc/<pid>/oom_score_adj``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from koordlet.runtimehooks.protocol import NOTHING, ContainerRequest, PodRequest, Resources, Rule
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_refusals = OncePerChange(log)

ANNOTATION = "koordinator.sh/oom-score-adj"
ANNOTATION_SPEC = "koordinator.sh/oom-score-adj-spec"
MIN, MAX = -1000, 1000


def _int(raw: object) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip(), 10)
        except ValueError:
            return None
    return None


def target(annotations: Mapping[str, str], container: str, who: str) -> int | None:
    """The value for ``container``, ``None`` when none (or an invalid one) is asked for."""
    raw: object = None
    spec = annotations.get(ANNOTATION_SPEC)
    if spec:
        try:
            doc = json.loads(spec)
        except ValueError:
            doc = None
        if not isinstance(doc, Mapping):
            _refusals.warning(f"{who} spec", f"pod {who}: {ANNOTATION_SPEC} is not a JSON object")
        elif container in doc:
            raw = doc[container]
    if raw is None:
        raw = annotations.get(ANNOTATION) or None
    if raw is None:
        return None
    value = _int(raw)
    if value is None or not MIN <= value <= MAX:
        _refusals.warning(f"{who} {container}", f"pod {who}: refusing oom_score_adj {raw!r} for {container}")
        return None
    return value


class OOMScoreAdj:
    name = "OOMScoreAdj"

    def pod(self, req: PodRequest, rule: Rule) -> Resources:
        return NOTHING

    def container(self, req: ContainerRequest, rule: Rule) -> Resources:
        if req.sandbox:
            return NOTHING
        who = f"{req.pod.namespace}/{req.pod.name}"
        value = target(req.pod.annotations, req.container.name, who)
        return NOTHING if value is None else Resources(oom_score_adj=value)
