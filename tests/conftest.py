"""Shared fixtures and the root/tool gating rules.

Tests that need root and the real kernel are marked ``@pytest.mark.root``; tests that need a system tool
are marked ``@pytest.mark.tool("stress-ng")``; tests of the C helpers are marked ``@pytest.mark.native``;
tests on the real cluster (``tests/real/``) are marked ``@pytest.mark.real_cluster``.
Off CI they skip when the need is not met; with ``CI=true`` an unmet need is a failure, so CI can never
pass by skipping them (a broken C build included).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordlet.system import native

ON_CI = os.environ.get("CI", "").lower() == "true"

# The plugin kit's fixtures (harness, fake_clock, plugin_registry) serve the agent's own tests too.
pytest_plugins = ["koordlet.testing.pytest_plugin"]

# Plugin distributions under fixtures/ carry their own tests; the guide test runs them as their authors
# would (in their own directory, against the installed koordlet), not as part of this suite.
collect_ignore = ["fixtures"]


def _unmet(item: pytest.Item) -> str | None:
    if item.get_closest_marker("root") is not None and os.geteuid() != 0:
        return "needs root"
    if item.get_closest_marker("native") is not None and not native.HAS_NATIVE:
        return "needs the compiled native module (a broken C build must not pass as a skip)"
    if item.get_closest_marker("real_cluster") is not None:
        from tests.realcluster.cluster import unmet

        why = unmet()
        if why:
            return why
    for marker in item.iter_markers("tool"):
        for tool in marker.args:
            if shutil.which(str(tool)) is None:
                return f"needs the system tool {tool!r}"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    why = _unmet(item)
    if why is None:
        return
    if ON_CI:
        pytest.fail(f"{why}, and CI=true: CI must run this test (.ci/run installs what tests need)")
    pytest.skip(why)


@pytest.fixture
def fake_host(tmp_path: Path) -> Iterator[Any]:
    """A throw-away host tree (cgroup v1 and v2 layouts, procfs, resctrl) wired through ``HostPaths``."""
    from tests.support.fakehost import FakeHost

    yield FakeHost(tmp_path)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``koordlet run`` only parses and validates: the daemon is replaced by a recorder of the
    ``Configuration`` it would have been built from."""
    from koordlet import daemon

    seen: list[Any] = []

    class Done:
        def run(self, stop: Any) -> int:
            return 0

    def fake_new_daemon(cfg: Any, *args: Any) -> Done:
        seen.append(cfg)
        return Done()

    monkeypatch.setattr(daemon, "new_daemon", fake_new_daemon)
    return seen
