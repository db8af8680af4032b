"""The node's container images, made here because nothing can be pulled: one layer holding Debian's
static busybox and its applet links, written as an OCI image layout tarball that ``ctr images import``
takes.

Two images share that layer: the workload image pods run (``busybox``), and the pause image the
runtime's sandboxes run (busybox as PID 1 waiting for a signal: the pod's namespaces need one process,
and the sandbox must stop on SIGTERM, which a PID 1 receives only for signals it handles).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

REGISTRY = "koordlet.local"
BUSYBOX = f"{REGISTRY}/busybox:1.0"
PAUSE = f"{REGISTRY}/pause:1.0"

# A trap makes SIGTERM end PID 1; the sleep runs in the background so the shell can take the signal.
_PAUSE_CMD = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]


@dataclass(frozen=True)
class Image:
    ref: str
    cmd: tuple[str, ...]
    env: tuple[str, ...] = ("PATH=/bin",)
    entrypoint: bool = False
    """``cmd`` is the image's Entrypoint (a pod's ``args`` follow it) rather than its Cmd."""


IMAGES = (Image(BUSYBOX, ("/bin/sh",)), Image(PAUSE, tuple(_PAUSE_CMD)))


def _busybox() -> Path:
    found = shutil.which("busybox")
    if found is None:
        raise RuntimeError("the node's images need a static busybox: apt-get install busybox-static")
    return Path(found)


def _layer(busybox: Path) -> bytes:
    """An uncompressed tar: ``/bin/busybox``, a link per applet, and the directories runc mounts over."""
    applets = subprocess.run(
        [str(busybox), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = mode
            tar.addfile(info)

        for d in ("bin", "dev", "etc", "proc", "sys", "var", "root"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        data = busybox.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in sorted(set(applets) - {"busybox"}):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            tar.addfile(link)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            raw = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size = len(raw)
            entry.mode = 0o644
            tar.addfile(entry, io.BytesIO(raw))
    return buf.getvalue()


def blob(out: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    """``data`` stored under ``blobs/sha256/``; its digest and size."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest[7:]}")
    info.size = len(data)
    info.mode = 0o644
    out.addfile(info, io.BytesIO(data))
    return digest, len(data)


def index_entry(
    out: tarfile.TarFile,
    image: Image,
    layers: list[tuple[str, int]],
    diff_ids: list[str],
    *,
    compressed: bool = True,
) -> dict[str, object]:
    """The config and manifest of ``image`` (its layers already stored) and its entry in ``index.json``."""
    run: dict[str, object] = {"Env": list(image.env), "WorkingDir": "/"}
    run["Entrypoint" if image.entrypoint else "Cmd"] = list(image.cmd)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": run,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    config_digest, config_size = blob(out, json.dumps(config).encode())
    media = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if compressed else "")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": [{"mediaType": media, "digest": d, "size": n} for d, n in layers],
    }
    digest, size = blob(out, json.dumps(manifest).encode())
    return {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest,
        "size": size,
        "annotations": {
            "io.containerd.image.name": image.ref,
            "org.opencontainers.image.ref.name": image.ref.rsplit(":", 1)[1],
        },
        "platform": {"architecture": "amd64", "os": "linux"},
    }


def write_layout(out: tarfile.TarFile, manifests: list[dict[str, object]]) -> None:
    for name, doc in (
        ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
        ("index.json", {"schemaVersion": 2, "manifests": manifests}),
    ):
        raw = json.dumps(doc).encode()
        info = tarfile.TarInfo(name)
        info.size = len(raw)
        info.mode = 0o644
        out.addfile(info, io.BytesIO(raw))


def write_archive(dest: Path, images: tuple[Image, ...] = IMAGES) -> Path:
    """One OCI image layout tarball holding every image (the layer stored once)."""
    layer = _layer(_busybox())
    with tarfile.open(dest, "w") as out:
        stored = blob(out, gzip.compress(layer, mtime=0))
        diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
        write_layout(out, [index_entry(out, image, [stored], [diff_id]) for image in images])
    return dest
