"""A third-party plugin distribution, built and installed into a temporary environment, is discovered,
listed, gated and run by the real ``koordlet`` command."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "plugin_dist"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Build the fixture distribution (wheel) and install it into its own site directory."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(FIXTURE, src)
    site = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    assert list(site.glob("koordlet_hello_plugin-*.dist-info")), "the distribution's metadata was installed"
    yield site


def koordlet(site: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "NODE_NAME": "node-under-test"}
    return subprocess.run(
        [sys.executable, "-m", "koordlet", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **kw,
    )  # type: ignore[call-overload]


def test_discovered_listed_and_gated(plugin_site: Path) -> None:
    listed = koordlet(plugin_site, "plugins", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("Hello "))
    assert row == ["Hello", "entrypoint:koordlet-hello-plugin", "Alpha", "false", "false"]
    on = koordlet(plugin_site, "plugins", "list", "--qos-extension-plugins=Hello=true")
    assert next(line for line in on.stdout.splitlines() if line.startswith("Hello ")).split()[-1] == "true"
    helptext = koordlet(plugin_site, "run", "--help")
    assert "--hello-file" in helptext.stdout and "[plugin Hello]" in helptext.stdout
    # The extension gate is separate from koordlet's gates.
    wrong = koordlet(plugin_site, "run", "--feature-gates=Hello=true")
    assert wrong.returncode == 2 and "unrecognized feature gate: Hello" in wrong.stderr


def test_the_plugin_runs_only_when_enabled(plugin_site: Path, tmp_path: Path) -> None:
    from tests.integration.agentproc import free_port, standalone_args

    marker = tmp_path / "hello.txt"
    for enabled in (False, True):
        port = free_port()
        args = [
            *standalone_args(tmp_path, port),
            f"--hello-file={marker}",
            "--hello-interval-seconds=0.1",
            f"--qos-extension-plugins=Hello={str(enabled).lower()}",
        ]
        env = {**os.environ, "PYTHONPATH": str(plugin_site), "NODE_NAME": "node-under-test"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "koordlet", "run", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not (enabled and marker.exists()):
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
            if not enabled:
                time.sleep(1.5)
                assert not marker.exists(), "a disabled plugin must never run"
            else:
                assert marker.exists(), "the enabled plugin ticked"
                assert "node=node-under-test" in marker.read_text()
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err[-2000:]
        if enabled:
            assert marker.read_text().endswith("shutdown\n")
