"""docs/plugins/scheduler.md and docs/plugins/descheduler.md, followed to the letter: each guide's plugin,
test and pyproject are taken from the guide alone, the plugin's own test passes on the kind's testing kit,
the wheel installs, and the real process finds it, builds it with the guide's configuration and refuses
bad args at start. (The QoS guide, docs/plugins/qos.md, has its own test: test_plugin_guide.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.cluster.pluginsite import install_wheel
from tests.support.paths import ROOT

FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```", re.S)
YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)

GUIDES = {
    # kind -> (guide, module, entry point name, distribution, process module, entry-point group)
    "scheduler": ("scheduler.md", "avoid_label", "AvoidLabel", "avoid_label", "koord.scheduler"),
    "descheduler": (
        "descheduler.md",
        "evict_labelled",
        "EvictLabelled",
        "evict_labelled",
        "koord.descheduler",
    ),
}


def guide_text(kind: str) -> str:
    return (ROOT / "docs" / "plugins" / GUIDES[kind][0]).read_text()


def write_guide(kind: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name, text in FILE_BLOCK.findall(guide_text(kind)):
        (dest / name).write_text(text)
    return dest


def run(cmd: list[str], cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.parametrize("kind", sorted(GUIDES))
def test_the_guide_is_one_module_one_test_and_one_entry_point(kind: str, tmp_path: Path) -> None:
    _, module, plugin, _, _ = GUIDES[kind]
    src = write_guide(kind, tmp_path / "src")
    assert sorted(p.name for p in src.iterdir()) == sorted(
        [f"{module}.py", f"test_{module}.py", "pyproject.toml"]
    )
    project = tomllib.loads((src / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["py-modules"] == [module]
    assert project["project"]["entry-points"][f"koord.{kind}_plugins"] == {plugin: f"{module}:{plugin}"}


@pytest.mark.parametrize("kind", sorted(GUIDES))
def test_the_guide_plugin_passes_its_own_test(kind: str, tmp_path: Path) -> None:
    src = write_guide(kind, tmp_path / "src")
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(src),
            "-c",
            "/dev/null",
        ],
        src,
        src,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b3 passed", done.stdout), done.stdout[-2000:]


@pytest.mark.parametrize("kind", sorted(GUIDES))
def test_the_installed_guide_plugin_is_found_and_built_by_the_process(kind: str, tmp_path: Path) -> None:
    _, _, plugin, dist, prog = GUIDES[kind]
    src = write_guide(kind, tmp_path / "guide")
    site = install_wheel(src, tmp_path / "install", dist)
    (config_text,) = [y for y in YAML_BLOCK.findall(guide_text(kind)) if "apiVersion" in y]
    config = tmp_path / "config.yaml"
    config.write_text(config_text)
    listed = run([sys.executable, "-m", prog, f"--config={config}", "--list-plugins"], tmp_path, site)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert rows[plugin][0] == f"entrypoint:{dist.replace('_', '-')}"
    assert rows[plugin][1] != "-", listed.stdout  # enabled by the guide's configuration
    bad = tmp_path / "bad.yaml"
    bad.write_text(re.sub(r"args: \{[^}]*\}", "args: {typo: 1}", config_text))
    refused = run([sys.executable, "-m", prog, f"--config={bad}", "--list-plugins"], tmp_path, site)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"plugin '{plugin}'" in refused.stderr and "invalid args" in refused.stderr
