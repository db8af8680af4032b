"""Plugin-side helpers: reading cpusets and quotas back, cgroup depth split."""

from __future__ import annotations

import pytest

from koordlet.testing import make_harness
from qosplugins import _shared


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("", set()), ("3-1", None), ("a", None), (None, None)],
)
def test_read_cpuset_is_none_when_unknown(text: str | None, cpus: set[int] | None) -> None:
    h = make_harness()
    h.host.add_cgroup("kubepods/besteffort/x")
    if text is not None:
        h.host.values[("cpuset.cpus", "kubepods/besteffort/x")] = text
    got = _shared.read_cpuset(h.ctx, "kubepods/besteffort/x")
    assert (None if got is None else set(got)) == cpus


@pytest.mark.parametrize(
    ("text", "quota"),
    [
        ("-1", -1),
        ("-2", -1),
        ("max 100000", None),  # the host reader never shows v2 text: cpu.max is read as its v1 value
        ("50000 100000", None),
        ("20000", 20000),
        ("x", None),
        ("", None),
    ],
)
def test_parse_quota(text: str, quota: int | None) -> None:
    # the kernel reads any negative v1 quota back as unlimited, so all of them mean -1
    assert _shared.parse_quota(text) == quota


def test_dirs_by_depth() -> None:
    dirs = ["be", "be/pod1", "be/pod1/c1", "be/pod2", "be/pod1/c1/deeper", "other", "bex/pod3"]
    assert _shared.dirs_by_depth("be", dirs) == [["be"], ["be/pod1", "be/pod2"], ["be/pod1/c1"]]
