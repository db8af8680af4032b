"""What the plugin tells users about a gang, in one voice: every message names the gang (or gang group),
how many members wait at Permit of how many it needs, and why its pods are not placed. These texts reach
the pods' ``FailedScheduling`` Events and ``PodScheduled=False`` conditions.
"""

from __future__ import annotations

from collections.abc import Sequence

from koord.scheduler.plugins.coscheduling.gang import Gang
from koordshared.apis.meta.quantity import format_duration


def subject(group: Sequence[str]) -> str:
    """``gang ns/a``, or ``gang group [ns/a ns/b]`` when several gangs go together."""
    return f"gang {group[0]}" if len(group) == 1 else f"gang group [{' '.join(group)}]"


def waiting(gangs: Sequence[Gang]) -> str:
    """``2 of 3 members waiting at Permit`` (per gang, for a group)."""
    if len(gangs) == 1:
        g = gangs[0]
        return f"{len(g.waiting)} of {g.min_member} members waiting at Permit"
    return "members waiting at Permit: " + ", ".join(
        f"{g.id} {len(g.waiting)} of {g.min_member}" for g in gangs
    )


def incomplete(
    group: Sequence[str],
    missing: Sequence[str],
    undefined: Sequence[tuple[str, str]],
    short: Sequence[Gang],
    present: Sequence[Gang],
) -> str:
    """Why a gang's pods stay out of the active queue: a gang of its group lacks pods or a definition."""
    alone = len(group) == 1
    parts = [f"gang {g} does not exist" for g in missing]
    parts += [f"{'' if alone else f'gang {g} '}is not defined: {why}" for g, why in undefined]
    parts += [
        f"only {len(g.children)} pods{'' if alone else f' of gang {g.id}'} exist, "
        f"min-available is {g.min_member}"
        for g in short
    ]
    suffix = f" ({waiting(present)})" if present else ""
    return f"{subject(group)}: {'; '.join(parts)}{suffix}"


def rejected(group: Sequence[str], gangs: Sequence[Gang], why: str) -> str:
    """The members waiting at Permit go back to the queue."""
    return f"{subject(group)}: rejected with {waiting(gangs)}: {why}"


def kept(group: Sequence[str], gangs: Sequence[Gang], why: str = "", until: str = "") -> str:
    """NonStrict: the members waiting at Permit stay there (``until`` what)."""
    head = f"{subject(group)}: {why + '; ' if why else ''}"
    if not any(g.waiting for g in gangs):
        return f"{head}no other member waits at Permit (NonStrict)"
    return f"{head}{waiting(gangs)} keep waiting{' ' + until if until else ''} (NonStrict)"


def cannot_place(pod: str, fit: str) -> str:
    return f"member {pod} cannot be placed: {fit}"


def timed_out(pod: str, seconds: float) -> str:
    return f"member {pod} waited {format_duration(seconds)} (the gang's waiting time) for the others"


def left_permit(pod: str) -> str:
    return f"member {pod} left Permit without being bound"


def exhausted() -> str:
    return "every pending member was tried and too few can be placed"


def wait_reason(gang: Gang) -> str:
    """A waiting member's reason (kept by the framework, shown if the wait times out)."""
    of = "" if len(gang.group) == 1 else f" of {gang.id}"
    return (
        f"{subject(gang.group)} needs {gang.min_member} members{of} waiting at Permit (min-available), "
        f"waiting-time {format_duration(gang.wait_seconds)}"
    )
