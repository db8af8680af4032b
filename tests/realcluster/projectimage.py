"""The project's own image, ``koordlet-py:0.1.0``, made from this machine's Python for a node that cannot
pull or build images: the manifests of ``deploy/`` then run as they are, as real pods.

It holds what the Dockerfile's image holds, laid out the same way (``/usr/local`` Python, the packages
of the project and its runtime dependencies in site-packages, console scripts on ``PATH``, ``/koordlet``,
the Dockerfile's environment and entrypoint), taken from the running interpreter instead of built: the
interpreter and the standard library (tests and GUI modules left out), every distribution the project
requires at run time (from their installed file lists), the project's packages with the compiled
helper, and the shared libraries all of it links (from ``ldd``). Two layers: the runtime, which changes
with the interpreter and the dependencies only (its tarball is cached by digest), and the project's code.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from packaging.markers import Marker

from tests.realcluster.images import Image, blob, index_entry, write_layout

NAME = "docker.io/library/koordlet-py:0.1.0"
"""What ``image: koordlet-py:0.1.0`` in ``deploy/`` resolves to."""
PROJECT = "koordlet"
PACKAGES = ("koordlet", "koordshared", "koord", "qosplugins")
PREFIX = "usr/local"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
SITE = f"{PREFIX}/lib/{PY}/site-packages"
_SKIP_STDLIB = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "__pycache__",
}
ENV = {
    "PATH": f"/{PREFIX}/bin:/usr/bin:/bin",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "KOORDLET_CGROUP_ROOT_DIR": "/host-cgroup/",
    "KOORDLET_SYS_ROOT_DIR": "/host-sys/",
    "KOORDLET_SYS_FS_ROOT_DIR": "/host-sys-fs/",
    "KOORDLET_VAR_RUN_ROOT_DIR": "/host-var-run/",
    "KOORDLET_PROC_ROOT_DIR": "/proc/",
    "KOORDLET_TSDB_PATH": "/metric-data/",
}
ENTRYPOINT = ("koordlet", "run")


def runtime_distributions() -> dict[str, md.Distribution]:
    """The project's distribution and every one it requires to run (extras and other platforms out)."""
    seen: dict[str, md.Distribution] = {}

    def visit(name: str) -> None:
        dist = md.distribution(name)
        key = str(dist.metadata["Name"]).lower().replace("_", "-")
        if key in seen:
            return
        seen[key] = dist
        for req in dist.requires or []:
            spec, _, marker = req.partition(";")
            if marker and not Marker(marker).evaluate({"extra": ""}):
                continue
            visit(re.split(r"[ <>=!~\[(]", spec.strip())[0])

    visit(PROJECT)
    return seen


def _walk(root: Path, arc: str, skip: set[str] = frozenset()) -> Iterator[tuple[Path, str]]:  # type: ignore[assignment]
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip and d != "__pycache__")
        rel = os.path.relpath(dirpath, root)
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            yield Path(dirpath) / f, os.path.normpath(f"{arc}/{rel}/{f}")


def _runtime_files() -> list[tuple[Path, str]]:
    base = Path(sys.base_prefix)
    out: list[tuple[Path, str]] = [(Path(os.path.realpath(sys.executable)), f"{PREFIX}/bin/{PY}")]
    stdlib = Path(sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["stdlib"])
    out += list(_walk(stdlib, f"{PREFIX}/lib/{PY}", _SKIP_STDLIB))
    # In a directory the loader searches by default: the interpreter's own run path is this machine's.
    for so in sorted((base / "lib").glob("libpython*.so*")):
        out.append((so, f"usr/lib/x86_64-linux-gnu/{so.name}"))
    site = Path(sysconfig.get_paths()["purelib"])
    for key, dist in sorted(runtime_distributions().items()):
        if key == PROJECT:
            continue
        for f in dist.files or []:
            path = Path(str(dist.locate_file(f)))
            if path.is_file() and "__pycache__" not in f.parts:
                try:
                    rel = path.resolve().relative_to(site.resolve())
                except ValueError:
                    continue  # a script installed outside site-packages: the console scripts are made anew
                out.append((path, f"{SITE}/{rel}"))
    return out


def _project_files(repo: Path) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for pkg in PACKAGES:
        out += list(_walk(repo / pkg, f"{SITE}/{pkg}"))
    dist = md.distribution(PROJECT)
    info = Path(str(dist.locate_file(""))) / f"{PROJECT}-{dist.version}.dist-info"
    for f in ("METADATA", "entry_points.txt"):
        if (info / f).exists():
            out.append((info / f, f"{SITE}/{info.name}/{f}"))
    return out


def _libraries(files: Iterable[Path]) -> set[str]:
    """Every shared library the interpreter and the extension modules link, as ``ldd`` resolves them."""
    libs: set[str] = set()
    for path in files:
        if not (path.name.endswith(".so") or ".so." in path.name or path.name.startswith("python")):
            continue
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            found = re.search(r"(/\S+)", line.split("=>")[-1])
            if found and os.path.exists(found.group(1)):
                lib = os.path.normpath(found.group(1))
                # A wheel's own libraries (numpy.libs/...) come with its files, at their place.
                if not lib.startswith((sys.prefix, sys.base_prefix)):
                    libs.add(lib)
    return libs


def _console_scripts() -> list[tuple[str, bytes]]:
    dist = md.distribution(PROJECT)
    out = []
    for ep in dist.entry_points:
        if ep.group != "console_scripts":
            continue
        module, _, attr = ep.value.partition(":")
        body = f"#!/{PREFIX}/bin/{PY}\nimport sys\nfrom {module} import {attr}\nsys.exit({attr}())\n"
        out.append((ep.name, body.encode()))
    return out


def _tar(entries: Iterable[tuple[Path | bytes, str, int]], links: Iterable[tuple[str, str]] = ()) -> bytes:
    """An uncompressed layer: files (path or bytes, name, mode), then symlinks; directories implied."""
    buf = io.BytesIO()
    made: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def parents(name: str) -> None:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)

        for source, name, mode in sorted(entries, key=lambda e: e[1]):
            parents(name)
            data = source if isinstance(source, bytes) else source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            parents(name)
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


def _mode(path: Path) -> int:
    # World-readable: the scheduler's and the manager's pods run as an arbitrary non-root user.
    return 0o755 if os.access(path, os.X_OK) else 0o644


def runtime_layer(cache: Path) -> bytes:
    files = _runtime_files()
    key = hashlib.sha256(json.dumps(sorted((str(p), a, p.stat().st_size) for p, a in files)).encode())
    cached = cache / f"runtime-{key.hexdigest()[:16]}.tar"
    if cached.exists():
        return cached.read_bytes()
    entries: list[tuple[Path | bytes, str, int]] = [(p, a, _mode(p)) for p, a in files]
    for lib in sorted(_libraries(p for p, _ in files)):
        entries.append((Path(lib), lib.lstrip("/"), 0o755))
    links = [(f"{PREFIX}/bin/python3", PY), (f"{PREFIX}/bin/python", PY)]
    data = _tar(entries, links)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".partial")
    tmp.write_bytes(data)
    tmp.replace(cached)
    return data


def project_layer(repo: Path) -> bytes:
    entries: list[tuple[Path | bytes, str, int]] = [(p, a, 0o644) for p, a in _project_files(repo)]
    scripts = _console_scripts()
    entries += [(body, f"{PREFIX}/bin/{name}", 0o755) for name, body in scripts]
    return _tar(entries, [("koordlet", f"/{PREFIX}/bin/koordlet")])


def write_archive(dest: Path, repo: Path, cache: Path) -> Path:
    """The image as an OCI layout tarball ``ctr images import`` takes."""
    layers = [runtime_layer(cache), project_layer(repo)]
    image = Image(NAME, ENTRYPOINT, env=tuple(f"{k}={v}" for k, v in ENV.items()), entrypoint=True)
    with tarfile.open(dest, "w") as out:
        descriptors = [blob(out, data) for data in layers]
        diff_ids = ["sha256:" + hashlib.sha256(data).hexdigest() for data in layers]
        write_layout(out, [index_entry(out, image, descriptors, diff_ids, compressed=False)])
    return dest
