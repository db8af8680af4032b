"""A third-party plugin distribution, built and installed into a temporary environment, is discovered,
listed, gated and run by the real ``koordlet`` command."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, install_distribution, koordlet_command
from tests.support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "plugin_dist"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the fixture distribution (wheel) and install it into its own site directory."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(FIXTURE, src)
    site = install_distribution(src, work / "site")
    assert list(site.glob("koordlet_hello_plugin-*.dist-info")), "the distribution's metadata was installed"
    assert not list(site.glob("test_*")), "the plugin's test is not part of its wheel"
    yield site


def test_discovered_listed_and_gated(plugin_site: Path) -> None:
    listed = koordlet_command("plugins", "list", site=plugin_site)
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("Hello "))
    assert row == ["Hello", "entrypoint:koordlet-hello-plugin", "Alpha", "false", "false"]
    on = koordlet_command("plugins", "list", "--qos-extension-plugins=Hello=true", site=plugin_site)
    assert next(line for line in on.stdout.splitlines() if line.startswith("Hello ")).split()[-1] == "true"
    helptext = koordlet_command("run", "--help", site=plugin_site)
    assert "--hello-file" in helptext.stdout and "[plugin Hello]" in helptext.stdout
    # The extension gate is separate from koordlet's gates.
    wrong = koordlet_command("run", "--feature-gates=Hello=true", site=plugin_site)
    assert wrong.returncode == 2 and "unrecognized feature gate: Hello" in wrong.stderr


def test_the_plugin_runs_only_when_enabled(plugin_site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "hello.txt"
    for enabled in (False, True):
        agent = Agent(
            tmp_path,
            f"--hello-file={marker}",
            "--hello-interval-seconds=0.1",
            f"--qos-extension-plugins=Hello={str(enabled).lower()}",
            env={"PYTHONPATH": str(plugin_site), "NODE_NAME": "node-under-test"},
        )
        try:
            agent.wait_ready()
            assert agent.get("/plugins")["Hello"] == ("running" if enabled else "disabled")
            if enabled:
                assert wait_until(marker.exists, 20), "the enabled plugin ticked"
                assert "node=node-under-test" in marker.read_text()
            else:
                # ready means every enabled plugin has started: ten of Hello's intervals later, still nothing
                assert not wait_until(marker.exists, 1.0, step=0.1), "a disabled plugin must never run"
        finally:
            code = agent.stop()
        assert code == 0, agent.tail()
        if enabled:
            assert marker.read_text().endswith("shutdown\n")
