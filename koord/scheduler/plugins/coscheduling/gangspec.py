"""A gang's description, read from its first pod's annotations (``tryInitByPodConfig``) or from its
PodGroup (``tryInitByPodGroup``), with Koordinator's defaults and fallbacks.

A value Koordinator cannot use falls back as there (``total-number`` to ``min-available``, ``mode`` to
Strict, ``match-policy`` and ``waiting-time`` to the plugin's defaults, ``groups`` to the gang alone),
but the fallback is no longer silent: each one is a *problem* the plugin reports on the gang's pods.
A missing or malformed ``min-available`` leaves the gang undefined, and its pods wait with that reason.
A waiting time above the framework's 15-minute Permit limit is cut to 15 minutes and reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord.scheduler.framework import MAX_PERMIT_WAIT
from koord.scheduler.plugins.coscheduling.args import CoschedulingArgs
from koordshared.apis.core.pod import as_map
from koordshared.apis.extension.coscheduling import (
    ALIAS_MATCH_POLICY,
    GANG_GROUPS,
    GANG_MATCH_POLICY,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_TOTAL_NUMBER,
    GANG_WAITING_TIME,
    LIGHTWEIGHT_MIN_LABEL,
    GangMode,
    MatchPolicy,
)
from koordshared.apis.meta.quantity import format_duration, parse_duration
from koordshared.runtime.errors import InvalidValue

INT32_MAX = 2**31 - 1


def q(text: str) -> str:
    """A value quoted as Go's ``%q`` does (the way Koordinator's and kube's messages quote)."""
    return json.dumps(text, ensure_ascii=False)


class BadGang(ValueError):
    """The gang cannot be defined (its ``min-available`` is missing or malformed)."""


@dataclass(frozen=True, slots=True)
class GangSpec:
    min_member: int
    total: int
    mode: GangMode
    match_policy: MatchPolicy
    wait_seconds: float
    group: tuple[str, ...]
    """The gang ids bound together (the gang alone unless ``groups`` says otherwise), sorted."""
    from_pod_group: bool
    problems: tuple[str, ...] = ()
    """Values that fell back to a default, each saying which and why."""

    @property
    def group_id(self) -> str:
        """``GetGangGroupId``: the sorted gang ids joined with commas."""
        return ",".join(self.group)


def _meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return as_map(as_map(obj, "metadata"), key)


def _int(text: str, what: str) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise BadGang(f"{what} {q(text)} is not an integer") from None
    if not -INT32_MAX - 1 <= value <= INT32_MAX:
        raise BadGang(f"{what} {q(text)} is out of range")
    return value


def min_member_of_pod(pod: Mapping[str, Any]) -> int:
    """``GetGangMinNumFromPod``: the lightweight label, else the annotation; :class:`BadGang` if neither
    holds a usable count."""
    label = str(_meta(pod, "labels").get(LIGHTWEIGHT_MIN_LABEL) or "")
    if label:
        value = _int(label, f"label {LIGHTWEIGHT_MIN_LABEL}")
        where = f"label {LIGHTWEIGHT_MIN_LABEL}"
    else:
        annotations = _meta(pod, "annotations")
        if GANG_MIN_AVAILABLE not in annotations:
            raise BadGang(f"annotation {GANG_MIN_AVAILABLE} is missing: the gang's size is unknown")
        value = _int(str(annotations[GANG_MIN_AVAILABLE]), f"annotation {GANG_MIN_AVAILABLE}")
        where = f"annotation {GANG_MIN_AVAILABLE}"
    if value < 0:
        raise BadGang(f"{where} {value} is negative")
    return value


def _total(annotations: Mapping[str, Any], min_member: int, problems: list[str]) -> int:
    raw = str(annotations.get(GANG_TOTAL_NUMBER) or "")
    if not raw:
        return min_member
    try:
        total = _int(raw, f"annotation {GANG_TOTAL_NUMBER}")
    except BadGang as err:
        problems.append(f"{err}: using min-available {min_member}")
        return min_member
    if total == 0:
        return min_member
    if total < min_member:
        problems.append(
            f"annotation {GANG_TOTAL_NUMBER} {total} is below min-available {min_member}: using {min_member}"
        )
        return min_member
    return total


def _mode(annotations: Mapping[str, Any], problems: list[str]) -> GangMode:
    raw = str(annotations.get(GANG_MODE) or "")
    if not raw:
        return GangMode.STRICT
    if raw in {m.value for m in GangMode}:
        return GangMode(raw)
    problems.append(f"annotation {GANG_MODE} {q(raw)} is neither Strict nor NonStrict: using Strict")
    return GangMode.STRICT


def _policy(annotations: Mapping[str, Any], args: CoschedulingArgs, problems: list[str]) -> MatchPolicy:
    raw = str(annotations.get(GANG_MATCH_POLICY) or annotations.get(ALIAS_MATCH_POLICY) or "")
    if not raw:
        return args.default_match_policy
    if raw in {m.value for m in MatchPolicy}:
        return MatchPolicy(raw)
    problems.append(
        f"annotation {GANG_MATCH_POLICY} {q(raw)} is not one of "
        f"{', '.join(m.value for m in MatchPolicy)}: using {args.default_match_policy.value}"
    )
    return args.default_match_policy


def _capped(seconds: float, what: str, problems: list[str]) -> float:
    if seconds <= MAX_PERMIT_WAIT:
        return seconds
    problems.append(
        f"{what} {format_duration(seconds)} exceeds the {format_duration(MAX_PERMIT_WAIT)} a pod may wait at "
        f"Permit: members wait at most {format_duration(MAX_PERMIT_WAIT)}"
    )
    return MAX_PERMIT_WAIT


def _wait_from_annotation(
    annotations: Mapping[str, Any], args: CoschedulingArgs, problems: list[str]
) -> float:
    raw = str(annotations.get(GANG_WAITING_TIME) or "")
    if not raw:
        return args.default_timeout
    try:
        seconds = parse_duration(raw)
    except InvalidValue:
        problems.append(
            f"annotation {GANG_WAITING_TIME} {q(raw)} is not a duration (e.g. 300s, 10m): using the default "
            f"{format_duration(args.default_timeout)}"
        )
        return args.default_timeout
    if seconds == 0:
        return args.default_timeout
    return _capped(seconds, f"annotation {GANG_WAITING_TIME}", problems)


def _group(annotations: Mapping[str, Any], own: str, problems: list[str]) -> tuple[str, ...]:
    raw = str(annotations.get(GANG_GROUPS) or "")
    if not raw:
        return (own,)
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(g, str) for g in parsed):
        problems.append(
            f'annotation {GANG_GROUPS} {q(raw)} is not a JSON list of "namespace/name": the gang is alone'
        )
        return (own,)
    for g in parsed:
        if g.count("/") != 1 or g.startswith("/") or g.endswith("/"):
            problems.append(f"annotation {GANG_GROUPS}: {q(g)} is not namespace/name, so no gang matches it")
    return tuple(sorted(set(parsed))) or (own,)


def from_pod(pod: Mapping[str, Any], own: str, args: CoschedulingArgs) -> GangSpec:
    """The gang ``own`` described by one of its pods (the annotation way); :class:`BadGang` when its size
    cannot be read."""
    annotations = _meta(pod, "annotations")
    problems: list[str] = []
    min_member = min_member_of_pod(pod)
    return GangSpec(
        min_member=min_member,
        total=_total(annotations, min_member, problems),
        mode=_mode(annotations, problems),
        match_policy=_policy(annotations, args, problems),
        wait_seconds=_wait_from_annotation(annotations, args, problems),
        group=_group(annotations, own, problems),
        from_pod_group=False,
        problems=tuple(problems),
    )


def from_pod_group(pg: Mapping[str, Any], own: str, args: CoschedulingArgs) -> GangSpec:
    """The gang ``own`` described by its PodGroup: ``spec.minMember``, ``spec.scheduleTimeoutSeconds``
    (when positive, else the default), and the optional annotations on the PodGroup."""
    annotations = _meta(pg, "annotations")
    spec = as_map(pg, "spec")
    problems: list[str] = []
    raw_min = spec.get("minMember", 0)
    min_member = raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) and raw_min >= 0 else 0
    if min_member != raw_min:
        problems.append(f"spec.minMember {json.dumps(raw_min)} is not a count: using 0")
    wait = args.default_timeout
    timeout = spec.get("scheduleTimeoutSeconds")
    if timeout is not None:
        if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0:
            wait = _capped(float(timeout), "spec.scheduleTimeoutSeconds", problems)
        else:
            problems.append(
                f"spec.scheduleTimeoutSeconds {json.dumps(timeout)} is not a positive number of seconds: "
                f"using the default {format_duration(args.default_timeout)}"
            )
    return GangSpec(
        min_member=min_member,
        total=_total(annotations, min_member, problems),
        mode=_mode(annotations, problems),
        match_policy=_policy(annotations, args, problems),
        wait_seconds=wait,
        group=_group(annotations, own, problems),
        from_pod_group=True,
        problems=tuple(problems),
    )
