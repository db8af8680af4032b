"""The real Kubernetes binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, etcd),
built from the Go module in ``kubebin/`` into a cache outside the repository and reused while that module
is unchanged.

The cache is keyed by the Kubernetes release and a digest of ``go.mod``/``go.sum`` and the link flags,
so a second build (or a second clone) finds them; ``KOORD_REAL_CACHE`` moves it. The version is stamped
into the binaries as Kubernetes' own build does (``k8s.io/component-base/version``), so the Node reports
its kubelet version and client-go its user agent as a release build would.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MODULE = Path(__file__).resolve().parent / "kubebin"

# Package path in the module graph -> binary name (go build names each after its last path element).
PACKAGES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "etcd": "go.etcd.io/etcd/server/v3",
}
# go build names a binary after its package path, less a major-version suffix: etcd's is "server".
_BUILT_AS = {"etcd": "server"}


class BuildError(RuntimeError):
    """The binaries could not be built; the message says what to install or look at."""


@dataclass(frozen=True)
class Binaries:
    version: str
    """The Kubernetes release, e.g. ``v1.34.4``."""
    bin_dir: Path

    def path(self, name: str) -> Path:
        return self.bin_dir / name

    def complete(self) -> bool:
        return all(os.access(self.path(n), os.X_OK) for n in PACKAGES)


def kube_version(module: Path = MODULE) -> str:
    found = re.search(r"^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+)\b", (module / "go.mod").read_text(), re.M)
    if found is None:
        raise BuildError(f"{module / 'go.mod'} requires no k8s.io/kubernetes release")
    return found.group(1)


def _ldflags(version: str) -> str:
    major, minor = version[1:].split(".")[:2]
    stamp = {
        "k8s.io/component-base/version.gitVersion": version,
        "k8s.io/component-base/version.gitMajor": major,
        "k8s.io/component-base/version.gitMinor": minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": version,
        "k8s.io/client-go/pkg/version.gitMajor": major,
        "k8s.io/client-go/pkg/version.gitMinor": minor,
    }
    return " ".join(["-s", "-w", *(f"-X {k}={v}" for k, v in stamp.items())])


def cache_root() -> Path:
    env = os.environ.get("KOORD_REAL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "koordlet" / "kube"


def expected(module: Path = MODULE) -> Binaries:
    """Where the binaries of this module's pinned release live (built or not)."""
    version = kube_version(module)
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module / name).read_bytes())
    digest.update(_ldflags(version).encode())
    return Binaries(version, cache_root() / f"{version}-{digest.hexdigest()[:12]}")


def _progress(proc: subprocess.Popen[str], say: Callable[[str], None], started: float) -> int:
    """Count the packages ``go build -v`` names, reporting every 30 s (a cold build takes minutes)."""
    assert proc.stdout is not None
    last = started
    tail: list[str] = []
    for count, line in enumerate(proc.stdout, 1):
        tail = [*tail, line.rstrip()][-40:]
        now = time.monotonic()
        if now - last >= 30:
            say(f"  ... {count} packages compiled, {now - started:.0f}s")
            last = now
    code = proc.wait()
    if code != 0:
        say("\n".join(tail))
    return code


def build(*, say: Callable[[str], None] = print, module: Path = MODULE) -> Binaries:
    """The binaries of the pinned release, built when the cache lacks them (a cold build is several
    minutes and a few GB of Go build cache; a warm one, nothing)."""
    want = expected(module)
    if want.complete():
        return want
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the real cluster needs Go (1.24 or newer) to build Kubernetes from its modules: install it, "
            "or run the tests without the real tier"
        )
    want.bin_dir.mkdir(parents=True, exist_ok=True)
    partial = want.bin_dir.with_name(want.bin_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    say(f"building Kubernetes {want.version} and etcd into {want.bin_dir} (a cold build takes 5-20 min)")
    started = time.monotonic()
    argv = [go, "build", "-v", "-trimpath", "-ldflags", _ldflags(want.version), "-o", str(partial) + "/"]
    proc = subprocess.Popen(
        [*argv, *PACKAGES.values()],
        cwd=module,
        env={**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        code = _progress(proc, say, started)
    finally:
        if proc.poll() is None:
            proc.kill()
    if code != 0:
        raise BuildError(f"go build failed (exit {code}); the output above says why")
    for name in PACKAGES:
        (partial / _BUILT_AS.get(name, name)).replace(want.path(name))
    shutil.rmtree(partial, ignore_errors=True)
    say(f"built in {time.monotonic() - started:.0f}s")
    return want
