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


def _blob(out: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest[7:]}")
    info.size = len(data)
    info.mode = 0o644
    out.addfile(info, io.BytesIO(data))
    return digest, len(data)


def write_archive(dest: Path, images: tuple[Image, ...] = IMAGES) -> Path:
    """One OCI image layout tarball holding every image (the layer stored once)."""
    layer = _layer(_busybox())
    gz = gzip.compress(layer, mtime=0)
    with tarfile.open(dest, "w") as out:
        layer_digest, layer_size = _blob(out, gz)
        manifests = []
        for image in images:
            config = {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Env": ["PATH=/bin"], "Cmd": list(image.cmd), "WorkingDir": "/"},
                "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
            }
            config_digest, config_size = _blob(out, json.dumps(config).encode())
            manifest = {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": config_digest,
                    "size": config_size,
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_digest,
                        "size": layer_size,
                    }
                ],
            }
            digest, size = _blob(out, json.dumps(manifest).encode())
            manifests.append(
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest,
                    "size": size,
                    "annotations": {
                        "io.containerd.image.name": image.ref,
                        "org.opencontainers.image.ref.name": image.ref.rsplit(":", 1)[1],
                    },
                    "platform": {"architecture": "amd64", "os": "linux"},
                }
            )
        for name, doc in (
            ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
            ("index.json", {"schemaVersion": 2, "manifests": manifests}),
        ):
            raw = json.dumps(doc).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(raw))
    return dest
