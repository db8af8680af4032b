"""Pytest fixtures for the koord-scheduler process tests (import them in the test module): the process-test
plugins installed from a wheel, the test's writes through the API, and koord-scheduler processes that
are stopped when the test ends, also on a failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver import APIServer
from tests.cluster.koordscheduler import POINTS_DIST, Cluster, KoordSchedulerProcess
from tests.cluster.pluginsite import install_wheel

Start = Callable[..., KoordSchedulerProcess]


def profile(
    trace: Path,
    enable: Mapping[str, Sequence[str]],
    args: Mapping[str, Mapping[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A profile enabling the process-test plugins at these points, each given the trace file."""
    plugins: dict[str, Any] = {
        point: {"enabled": [{"name": n} for n in names]} for point, names in enable.items()
    }
    used = sorted({n for names in enable.values() for n in names})
    config = [{"name": n, "args": {"trace": str(trace), **(args or {}).get(n, {})}} for n in used]
    return {**fields, "plugins": plugins, "pluginConfig": config}


def holding(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The trace, the release directory and a profile whose PreBind holds pods labelled
    ``points.test/hold`` until ``<release>/<pod name>`` exists (``Hold``), with Reserve recorded."""
    trace, release = tmp_path / "trace", tmp_path / "release"
    release.mkdir()
    enable = {"preBind": ["Hold"], "reserve": ["Recorder"]}
    return trace, release, profile(trace, enable, {"Hold": {"release": str(release)}})


@pytest.fixture(scope="session")
def points_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_wheel(
        POINTS_DIST, tmp_path_factory.mktemp("scheduler-points"), "koordlet_scheduler_points"
    )


@pytest.fixture
def cluster(api_server: APIServer) -> Iterator[Cluster]:
    c = Cluster(api_server)
    yield c
    c.close()


@pytest.fixture
def schedulers(tmp_path: Path, api_server: APIServer, points_site: Path) -> Iterator[Start]:
    """``start(config, *flags, name=, elect=, server=, ready=True)``: a koord-scheduler child, waited
    for until ready; every one started is stopped afterwards."""
    started: list[KoordSchedulerProcess] = []

    def start(
        config: Mapping[str, Any] | None = None,
        *flags: str,
        name: str = "koord-scheduler",
        elect: bool = False,
        server: APIServer | None = None,
        ready: bool = True,
    ) -> KoordSchedulerProcess:
        proc = KoordSchedulerProcess(
            tmp_path, server or api_server, config, *flags, name=name, site=points_site, elect=elect
        )
        started.append(proc)
        if ready:
            assert proc.ready(60), proc.log()[-3000:]
        return proc

    yield start
    for proc in started:
        if proc.alive():
            proc.stop()
