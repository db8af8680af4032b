"""The import contracts (.importlinter) cover every module, and each rule fails on a deliberately wrong
import: the packages are copied to a scratch tree, one import is added there, and lint-imports, run on
that copy with the project's own configuration, must report the contract broken (and keep it on the copy
without the import)."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("koordlet", "koordshared", "koord", "qosplugins")
LINT = Path(sys.executable).with_name("lint-imports")


def contracts() -> dict[str, configparser.SectionProxy]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    prefix = "importlinter:contract:"
    return {s[len(prefix) :]: parser[s] for s in parser.sections() if s.startswith(prefix)}


def _names(raw: str) -> list[str]:
    out = []
    for line in raw.splitlines():
        code = line.split("#", 1)[0].strip()
        out += [part.strip() for part in code.split("|") if part.strip()]
    return out


def modules() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join(parts))
    return sorted(out)


def test_every_module_is_covered_by_a_contract() -> None:
    """Each module lies in a layer of some layers contract or is a source of some forbidden contract."""
    covered: set[str] = set()
    for c in contracts().values():
        covered.update(_names(c.get("layers", "")))
        covered.update(_names(c.get("source_modules", "")))

    def is_covered(module: str) -> bool:
        return any(module == c or module.startswith(c + ".") for c in covered)

    assert [m for m in modules() if not is_covered(m)] == []


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contracts")
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / ".importlinter", root / ".importlinter")
    return root


def lint(root: Path, contract: str) -> subprocess.CompletedProcess[str]:
    # The scratch tree comes first on the path, so its packages (not the installed ones) are analysed.
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(root / ".importlinter"), "--contract", contract],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# contract id -> (file in the scratch tree, the import appended to it, why it must be refused)
WRONG = {
    "system": (
        "koordshared/runtime/logs.py",
        "import koord.scheduler.extender.app",
        "the runtime imports a process",
    ),
    "system#processes": (
        "koord/descheduler/app.py",
        "import koord.scheduler.extender.verbs",
        "a process imports another",
    ),
    "system#public-only": (
        "koord/manager/top.py",
        "import koord.scheduler.extender.app",
        "koord-manager reaches past the scheduler's public inspect module",
    ),
    "shared-imports-no-process": (
        "koordshared/kube/trim.py",
        "import koordlet.api",
        "the shared layer imports no process",
    ),
    "agent-imports-no-cluster-process": (
        "koordlet/cli.py",
        "import koord",
        "the agent is no cluster process",
    ),
    "agent-layers": ("koordlet/system/paths.py", "import koordlet.qosmanager", "a lower agent layer"),
    "runtime-layers": (
        "koordshared/runtime/httpwire.py",
        "import koordshared.runtime.lifecycle",
        "HTTP below threads",
    ),
    "apis-layers": (
        "koordshared/apis/meta/selector.py",
        "import koordshared.apis.core.pod",
        "meta is the bottom of the API types",
    ),
    "qos-plugins-see-only-api": ("qosplugins/cpuburst.py", "import koordlet.system", "a plugin"),
    "pure-contracts": ("koordshared/apis/meta/quantity.py", "import kubernetes", "the API types stay pure"),
    "only-informers-talk-to-the-api-server": (
        "koordlet/metricsadvisor/advisor.py",
        "import kubernetes",
        "only the informer",
    ),
    "only-the-loader-imports-qos-plugins": ("koordlet/daemon.py", "import qosplugins", "only the loader"),
    "scheduler-framework-is-pure": (
        "koord/scheduler/framework/interface.py",
        "import koordshared.kube.client",
        "the plugin contract talks to no API server",
    ),
    "scheduler-plugins-see-the-framework": (
        "koord/scheduler/plugins/__init__.py",
        "import koord.scheduler.extender.verbs",
        "plugins see only the framework",
    ),
    "descheduler-framework-is-pure": (
        "koord/descheduler/framework/interface.py",
        "import koord.descheduler.evictor",
        "the plugin contract knows no evictor",
    ),
    "descheduler-plugins-see-the-framework": (
        "koord/descheduler/plugins/__init__.py",
        "import koord.descheduler.app",
        "plugins see only the framework",
    ),
    "scheduler-layers": (
        "koord/scheduler/queue/podinfo.py",
        "import koord.scheduler.core.scheduler",
        "the queue sits below the scheduler core",
    ),
    "testing-kits-stay-out": (
        "koord/scheduler/extender/verbs.py",
        "import koordshared.testing",
        "the processes never import a test kit",
    ),
}


def test_every_contract_has_a_wrong_import_below() -> None:
    assert {key.split("#")[0] for key in WRONG} == set(contracts())


@pytest.mark.parametrize("key", sorted(WRONG))
def test_a_wrong_import_breaks_its_contract(scratch: Path, key: str) -> None:
    contract = key.split("#", maxsplit=1)[0]
    rel, line, why = WRONG[key]
    path = scratch / rel
    original = path.read_text()
    try:
        path.write_text(original + f"\n{line}  # deliberately wrong: {why}\n")
        broken = lint(scratch, contract)
        assert broken.returncode != 0, f"{contract} kept with `{line}` in {rel}:\n{broken.stdout}"
        assert "BROKEN" in broken.stdout
    finally:
        path.write_text(original)
    kept = lint(scratch, contract)
    assert kept.returncode == 0, kept.stdout + kept.stderr
