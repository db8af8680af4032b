"""``requirements.lock``: every dependency pinned exactly, within pyproject's ranges, and used by the
Dockerfile and by make (so CI runs what the image ships)."""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib

from packaging.requirements import Requirement

from tests.support.paths import ROOT

LOCK = ROOT / "requirements.lock"


def pins() -> dict[str, str]:
    out = {}
    for raw in LOCK.read_text().splitlines():
        line = raw.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line}"
            out[name.lower().replace("_", "-")] = version
    return out


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_direct_dependency_is_pinned_within_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = pins()
    for raw in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        req = Requirement(raw)
        assert key(req.name) in locked, f"{req.name} is not in requirements.lock"
        assert req.specifier.contains(locked[key(req.name)]), f"{req.name}=={locked[key(req.name)]} vs {raw}"


def test_the_environment_runs_the_locked_versions() -> None:
    """make installs with ``-c requirements.lock``: what the tests run is what is locked (closure too)."""
    locked = pins()
    seen = {key(d.metadata["Name"]): d.version for d in md.distributions()}
    koordlet = md.distribution("koordlet")
    todo = [Requirement(r) for r in koordlet.requires or [] if "extra ==" not in r or '"test"' in r]
    checked = set()
    while todo:
        req = todo.pop()
        k = key(req.name)
        if k in checked or (req.marker is not None and not req.marker.evaluate({"extra": "test"})):
            continue
        checked.add(k)
        assert locked.get(k) == seen.get(k), f"{req.name}: locked {locked.get(k)}, installed {seen.get(k)}"
        todo += [Requirement(r) for r in md.distribution(req.name).requires or [] if "extra ==" not in r]
    assert len(checked) > 30


def test_make_and_the_dockerfile_use_the_lock() -> None:
    assert "-c requirements.lock" in (ROOT / "Makefile").read_text()
    assert "--constraint requirements.lock" in (ROOT / "Dockerfile").read_text()
