"""docs/plugins/qos.md, followed to the letter: its plugin, its test and its pyproject are taken from the
guide alone, the plugin's own test passes, the wheel installs, and the real agent runs it on the real kernel.

The sample distribution under tests/fixtures/plugin_dist follows the same layout and is checked the same
way (its own test, one module, one entry point).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordlet.api.cpulist import parse_cpuset
from koordlet.system.paths import HostPaths
from koordlet.testing import wait_until
from koordlet.testing.agent import Agent, install_distribution, koordlet_command
from koordlet.testing.cgroups import RealKubepods
from tests.support.paths import ROOT

GUIDE = ROOT / "docs" / "plugins" / "qos.md"
FIXTURE = ROOT / "tests" / "fixtures" / "plugin_dist"
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```", re.S)


def guide_files() -> dict[str, str]:
    return {name: text for name, text in FILE_BLOCK.findall(GUIDE.read_text())}


def layout(src: Path) -> tuple[list[str], list[str], dict[str, str]]:
    """The distribution's plugin modules, test files and koordlet entry points."""
    project = tomllib.loads((src / "pyproject.toml").read_text())
    modules = project["tool"]["setuptools"]["py-modules"]
    tests = sorted(p.name for p in src.glob("test_*.py"))
    return modules, tests, project["project"]["entry-points"]["koordlet.qos_plugins"]


@pytest.fixture(scope="module")
def guide_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("guide") / "be-quota-cap"
    src.mkdir()
    for name, text in guide_files().items():
        (src / name).write_text(text)
    return src


@pytest.fixture(scope="module")
def guide_site(guide_src: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("guide-site")
    src = work / "src"
    shutil.copytree(guide_src, src)
    yield install_distribution(src, work / "site")


def test_the_guide_plugin_is_one_module_one_test_and_one_entry_point(guide_src: Path) -> None:
    assert sorted(guide_files()) == ["be_quota_cap.py", "pyproject.toml", "test_be_quota_cap.py"]
    assert layout(guide_src) == (
        ["be_quota_cap"],
        ["test_be_quota_cap.py"],
        {"BEQuotaCap": "be_quota_cap:BEQuotaCap"},
    )
    assert layout(FIXTURE) == (["hello_plugin"], ["test_hello_plugin.py"], {"Hello": "hello_plugin:Hello"})


@pytest.mark.parametrize("which", ["guide", "fixture"])
def test_the_plugin_passes_its_own_test_as_its_author_runs_it(
    guide_src: Path, which: str, tmp_path: Path
) -> None:
    src = guide_src if which == "guide" else FIXTURE
    work = tmp_path / "src"
    shutil.copytree(src, work)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(work),
            "-c",
            "/dev/null",
        ],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(work)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"\b[1-9]\d* passed", run.stdout), run.stdout[-2000:]


def test_the_installed_guide_plugin_is_listed_with_its_flags(guide_site: Path) -> None:
    listed = koordlet_command("plugins", "list", "--qos-extension-plugins=BEQuotaCap=true", site=guide_site)
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("BEQuotaCap "))
    assert row == ["BEQuotaCap", "entrypoint:koordlet-be-quota-cap", "Alpha", "false", "true"]
    helptext = koordlet_command("run", "--help", site=guide_site).stdout
    assert "--be-quota-cap-percent" in helptext and "[plugin BEQuotaCap]" in helptext


@pytest.mark.root
def test_the_installed_guide_plugin_caps_be_on_the_real_kernel(
    guide_site: Path, kubepods: RealKubepods, tmp_path: Path
) -> None:
    online = len(parse_cpuset(HostPaths().sys("devices", "system", "cpu", "online").read_text()))
    quota_file = kubepods.path("cpu", f"{kubepods.kubepods}/besteffort", "cpu.cfs_quota_us")
    agent = Agent(
        tmp_path,
        f"--cgroup-root=/{kubepods.parent}",
        "--qos-extension-plugins=BEQuotaCap=true",
        "--be-quota-cap-percent=25",
        env={"PYTHONPATH": str(guide_site)},
    )
    try:
        agent.wait_ready()
        assert agent.get("/plugins")["BEQuotaCap"] == "running"
        # 25 % of the node (online CPUs x 1000 millicores when standalone), per 100 ms period
        want = str(online * 1000 * 25 // 100 * 100)
        assert wait_until(lambda: quota_file.read_text().strip() == want, 15), (
            quota_file.read_text(),
            agent.tail(),
        )
    finally:
        code = agent.stop()
    assert code == 0, agent.tail()
    assert quota_file.read_text().strip() == "-1", "the plugin put the tier back when the agent stopped"
