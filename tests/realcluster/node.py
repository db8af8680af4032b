"""The node: containerd (Debian's 1.6, with runc) as the CRI runtime, CNI bridge networking confined to
addresses no other host uses, and the kubelet registering the Node with the cgroupfs driver.

What this machine needs (a microVM whose root lacks CAP_SYS_RESOURCE): containerd's CRI
``restrict_oom_score_adj`` (the sandbox's negative OOM score is otherwise refused and every sandbox
fails), the kubelet's ``oomScoreAdj: 0``, and ``failCgroupV1: false`` (v1.35 and later refuse cgroup v1
without it). The node's address is on a device of its own, so the kubelet's ports and the Node's
InternalIP are reachable from this host and from nowhere else; the pods' bridge has no address, no
gateway and no masquerade: nothing touches forwarding or iptables.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml

from tests.realcluster.binaries import Binaries
from tests.realcluster.control import Network, Ports
from tests.realcluster.images import PAUSE
from tests.realcluster.procs import Started, spawn, wait_until

POD_BRIDGE = "koordcni0"
# RFC 2544's benchmarking range: routed nowhere, so neither the node's address nor the pods' can meet a
# real host's. The node's address is on the pods' bridge and every pod's address is in the same /16: a
# pod reaches the node (the kubelet, kube-apiserver) on its own link, with no gateway, route or NAT.
NODE_IP = "198.18.0.1"
POD_SUBNET = "198.18.0.0/16"
POD_RANGE = ("198.18.1.2", "198.18.1.254")
SERVICE_CIDR = "198.18.0.0/24"
"""The Service range: its first address, the ``kubernetes`` Service's, is the node's, where kube-apiserver
listens on 443. A pod's in-cluster configuration (``KUBERNETES_SERVICE_HOST``/``PORT``) reaches it so
without a kube-proxy."""
API_PORT = 443
NETWORK = Network(NODE_IP, SERVICE_CIDR, NODE_IP)
CLUSTER_DNS = "198.18.0.10"  # answered by nothing: no pod of the tier resolves a name
CNI_BIN = Path("/usr/lib/cni")
CNI_NAME = "koord-real"

# Written by the kubelet or the runtime whatever their root directories say; removed at stop when the
# start found them absent.
HOST_LEFTOVERS = (
    Path("/var/lib/kubelet"),
    Path("/var/log/pods"),
    Path("/var/log/containers"),
    Path("/run/containerd"),
    Path("/var/lib/cni"),
    # The DaemonSet's prediction checkpoints (a hostPath the kubelet makes, DirectoryOrCreate).
    Path("/var/run/koordlet"),
)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def add_node_address() -> None:
    """The pods' bridge, made before the CNI plugin would, with the node's address on it."""
    ip("link", "add", POD_BRIDGE, "type", "bridge")
    ip("addr", "add", f"{NODE_IP}/16", "dev", POD_BRIDGE)
    ip("link", "set", POD_BRIDGE, "up")


KUBELET_ROOT = Path("/var/lib/kubelet")
"""The kubelet's usual root: the DaemonSet mounts it from the host by that path (the CPU manager's
checkpoint), and the kubelet writes parts of it whatever its ``--root-dir`` says."""
SHARED = (Path("/sys"),)
"""Mounts a pod's ``mountPropagation: HostToContainer`` needs shared: the DaemonSet's ``/sys/fs/``.
systemd makes every mount shared at boot; a machine without it (this one) has them private, and
containerd then refuses the container. The kubelet makes its own root directory shared itself."""


def propagation(point: Path) -> str:
    """``shared``, ``slave`` or ``private``, from the mount's optional fields in mountinfo."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(point):
                optional = fields[6 : fields.index("-")]
                if any(o.startswith("shared:") for o in optional):
                    return "shared"
                return "slave" if any(o.startswith("master:") for o in optional) else "private"
    raise LookupError(f"{point} is not a mount point")


def make_shared() -> list[str]:
    """Each of :data:`SHARED` that was private, made shared; what was changed (for the stop to undo)."""
    changed = []
    for point in SHARED:
        if propagation(point) == "private":
            subprocess.run(
                ["mount", "--make-shared", str(point)], check=True, capture_output=True, timeout=30
            )
            changed.append(str(point))
    return changed


def make_private(points: list[str]) -> list[str]:
    failed = []
    for point in points:
        done = subprocess.run(["mount", "--make-private", point], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            failed.append(f"{point}: {done.stderr.strip()}")
    return failed


def links() -> set[str]:
    out = ip("-o", "link", "show").stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def write_cni(conf_dir: Path, ipam_dir: Path) -> None:
    conf_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "cniVersion": "0.4.0",
        "name": CNI_NAME,
        "plugins": [
            {
                "type": "bridge",
                "bridge": POD_BRIDGE,
                "isGateway": False,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [{"subnet": POD_SUBNET, "rangeStart": POD_RANGE[0], "rangeEnd": POD_RANGE[1]}]
                    ],
                    "dataDir": str(ipam_dir),
                },
            }
        ],
    }
    (conf_dir / "10-koord-real.conflist").write_text(json.dumps(doc, indent=2))


def containerd_config(state: Path) -> Path:
    root = state / "containerd"
    cfg = f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{root / "containerd.sock"}"

[ttrpc]
  address = "{root / "containerd.sock.ttrpc"}"

[debug]
  level = "warn"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{state / "cni" / "net.d"}"
"""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "config.toml"
    path.write_text(cfg)
    return path


def containerd_socket(state: Path) -> Path:
    return state / "containerd" / "containerd.sock"


def ctr(state: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``ctr`` in the CRI's namespace; a call that hangs is a failed call (the stop must go on)."""
    argv = ["ctr", "--address", str(containerd_socket(state)), "--namespace", "k8s.io", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f}s")


def start_containerd(state: Path, logs: Path) -> Started:
    cfg = containerd_config(state)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    proc = spawn(
        "containerd", [shutil.which("containerd") or "containerd", "--config", str(cfg)], logs, env=env
    )
    wait_until(
        "containerd serving", lambda: ctr(state, "version", timeout=5).returncode == 0, 60, watch=[proc]
    )
    return proc


def import_images(state: Path, archive: Path) -> None:
    done = ctr(state, "images", "import", "--all-platforms", "--no-unpack", str(archive), timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"ctr images import failed: {done.stderr.strip()}")


def kubelet_config(state: Path, pki: Path, ports: Ports) -> Path:
    doc = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{containerd_socket(state)}",
        "oomScoreAdj": 0,
        "address": NODE_IP,
        "port": ports.kubelet,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports.kubelet_healthz,
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        # No DNS server runs: an address that answers nothing, so pods keep the ClusterFirst policy they
        # would have in a cluster instead of the kubelet falling back with a warning event per pod.
        "clusterDNS": [CLUSTER_DNS],
        "failSwapOn": False,
        "resolvConf": "/etc/resolv.conf",
        "podLogsDir": str(state / "kubelet" / "pod-logs"),
        # The machine's disk is shared with everything else on it: evict pods for memory only, and keep the
        # node's own images (they cannot be pulled again).
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
    }
    path = state / "kubelet" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def start_kubelet(
    bins: Binaries, state: Path, pki: Path, kubeconfig: Path, logs: Path, ports: Ports, node: str
) -> Started:
    cfg = kubelet_config(state, pki, ports)
    root = KUBELET_ROOT
    root.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    return spawn(
        "kubelet",
        [
            str(bins.path("kubelet")),
            f"--config={cfg}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={root}",
            f"--cert-dir={state / 'kubelet' / 'pki'}",
            f"--hostname-override={node}",
            f"--node-ip={NODE_IP}",
            "--v=1",
        ],
        logs,
        env=env,
    )


def kubepods_dirs(cgroup_root: Path = Path("/sys/fs/cgroup")) -> list[Path]:
    """Every ``kubepods`` cgroup at the root of a hierarchy (v1 controllers and the unified mount)."""
    return sorted(p for p in cgroup_root.glob("*/kubepods") if p.is_dir())


def kubepods_tasks(cgroup_root: Path = Path("/sys/fs/cgroup")) -> set[int]:
    """Every process in a ``kubepods`` tree (containers, whoever started them)."""
    pids: set[int] = set()
    for top in kubepods_dirs(cgroup_root):
        for procs in top.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    return pids


def kubelet_running(proc: Path = Path("/proc")) -> bool:
    """Whether a kubelet runs on this machine (anyone's: its cgroups and devices are not to be touched)."""
    for entry in proc.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                # A killed kubelet whose parent is gone stays a zombie until init reaps it.
                if (entry / "comm").read_text().strip() == "kubelet" and alive(int(entry.name)):
                    return True
    return False


def remove_cgroup_tree(top: Path) -> list[str]:
    """rmdir bottom up (a cgroup's files cannot be unlinked; an empty cgroup can be removed); what stayed."""
    stayed: list[str] = []
    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda e: -e[0].count("/")):
        try:
            os.rmdir(dirpath)
        except OSError as err:
            stayed.append(f"{dirpath}: {err.strerror}")
    return stayed


def mounts_under(*roots: Path) -> list[str]:
    """Mount points under any of ``roots``, deepest first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if any(point == str(r) or point.startswith(str(r).rstrip("/") + "/") for r in roots):
                found.append(point)
    return sorted(set(found), key=lambda p: -p.count("/"))


def unmount_all(*roots: Path) -> list[str]:
    """Lazily unmount every mount under ``roots``; what could not be unmounted."""
    failed: list[str] = []
    for _ in range(3):  # a mount may hide another at the same point
        points = mounts_under(*roots)
        if not points:
            return []
        failed = []
        for point in points:
            done = subprocess.run(["umount", "-l", point], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                failed.append(f"{point}: {done.stderr.strip()}")
    return failed or mounts_under(*roots)


def kill_tasks(state: Path) -> None:
    """End every container the runtime still runs (what the kubelet did not stop), so its shims exit."""
    if not containerd_socket(state).exists():
        return
    listed = ctr(state, "tasks", "ls", "-q", timeout=20)
    for task in listed.stdout.split():
        ctr(state, "tasks", "kill", "-s", "SIGKILL", task, timeout=20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        remaining = ctr(state, "tasks", "ls", "-q", timeout=20).stdout.split()
        for task in remaining:
            ctr(state, "tasks", "rm", "-f", task, timeout=20)
        if not remaining:
            break
        time.sleep(0.3)
    for container in ctr(state, "containers", "ls", "-q", timeout=20).stdout.split():
        ctr(state, "containers", "rm", container, timeout=20)


def kill_leftovers(state: Path) -> None:
    """SIGKILL what the runtime did not stop: processes still in the kubepods cgroups (containers whose
    task hung) and the shims serving this cluster's containerd (they outlive it by design). Again until
    none is left: a container in the host's PID namespace (hostPID) may fork while its parent is killed,
    and its children do not die with it."""
    socket = str(containerd_socket(state)).encode()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pids = kubepods_tasks()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if socket in (entry / "cmdline").read_bytes():
                        pids.add(int(entry.name))
        pids = {p for p in pids if alive(p)}
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def alive(pid: int) -> bool:
    """Running or sleeping: not gone, not a zombie waiting for its parent."""
    return _state(pid) not in ("Z", "gone")


def _state(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return raw[raw.rindex(")") + 2]


def delete_links() -> list[str]:
    """Remove the node's dummy device, the pods' bridge and any veth left on it."""
    problems = []
    for name in (POD_BRIDGE,):
        if name in links():
            done = ip("link", "del", name, check=False)
            if done.returncode != 0:
                problems.append(f"{name}: {done.stderr.strip()}")
    return problems


def clear(*mount_roots: Path) -> list[str]:
    """Take the node's machine-wide things down, its processes gone: the mounts under ``mount_roots``, the
    ``kubepods`` cgroups, the pods' bridge; what could not be removed."""
    left = unmount_all(*mount_roots)
    for top in kubepods_dirs():
        left += remove_cgroup_tree(top)
    return left + delete_links()


def remove_leftovers(absent_at_start: list[str]) -> None:
    for path in map(Path, absent_at_start):
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(path)
