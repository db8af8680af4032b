"""How long each extension point took, all its plugins together (kube-scheduler's
``scheduler_framework_extension_point_duration_seconds{extension_point, status, profile}``), and the
label values kube-scheduler uses for extension points, so its dashboards read ours unchanged.

A run function of the framework is wrapped with :func:`extension_point`; it costs nothing when the
framework has no ``point_timer`` (the extender front end, tests).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from koord.scheduler.framework.interface import Code, Status

if TYPE_CHECKING:
    from koord.scheduler.framework.runtime import Framework

P = ParamSpec("P")
R = TypeVar("R")
PointTimer = Callable[[str, str, str, float], None]
"""``(profile, extension point, status, seconds)``."""

# kube-scheduler's Code.String() values.
CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def kube_point(point: str) -> str:
    """The ``extension_point`` label kube-scheduler gives a point named here in camelCase
    (``preFilter`` -> ``PreFilter``; NormalizeScore is its ``ScoreExtensionNormalize``)."""
    if point == "normalizeScore":
        return "ScoreExtensionNormalize"
    return point[:1].upper() + point[1:]


def _code(out: Any) -> str:
    if isinstance(out, Status):
        return CODE_NAMES[out.code]
    if isinstance(out, tuple):
        for item in out:
            if isinstance(item, Status):
                return CODE_NAMES[item.code]
    return CODE_NAMES[Code.SUCCESS]


def extension_point(
    point: str,
) -> Callable[[Callable[Concatenate[Framework, P], R]], Callable[Concatenate[Framework, P], R]]:
    """Time a framework run function (a ``Framework`` method or a function taking it first) as
    ``point``; the status is the Status it answers (an exception counts as ``Error``)."""

    def wrap(fn: Callable[Concatenate[Framework, P], R]) -> Callable[Concatenate[Framework, P], R]:
        def run(fw: Framework, /, *args: P.args, **kwargs: P.kwargs) -> R:
            timer = fw.point_timer
            if timer is None:
                return fn(fw, *args, **kwargs)
            start = time.perf_counter()
            code = CODE_NAMES[Code.ERROR]
            try:
                out = fn(fw, *args, **kwargs)
                code = _code(out)
                return out
            finally:
                timer(fw.profile.scheduler_name, point, code, time.perf_counter() - start)

        functools.update_wrapper(run, fn)
        return run

    return wrap
