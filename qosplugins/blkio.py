"""``BlkIOReconcile``: block I/O throttles and weights per class and per pod (Koordinator's
``pkg/koordlet/qosmanager/plugins/blkio/blkio_reconcile.go``). Details: ``docs/modules.md``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence

from koordlet import api
from qosplugins import _qosconfig as cfg
from qosplugins import _shared
from qosplugins._refusals import Refusals

ANNOTATION = "koordinator.sh/blkioQOS"
SECTION = "blkioQOS"
WEIGHT = "blkio.cost.weight"
COST_QOS, COST_MODEL = "blkio.cost.qos", "blkio.cost.model"
THROTTLES: Mapping[str, str] = {
    # api.IOCfg field -> v1 file
    "read_iops": "blkio.throttle.read_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "write_bps": "blkio.throttle.write_bps_device",
}
NEUTRAL: Mapping[str, str] = {**dict.fromkeys(THROTTLES.values(), "0"), WEIGHT: "100", COST_QOS: "enable=0"}
"""What a device's line is reset to: no throttle, the default weight, iocost off."""
DEFAULT_LATENCY_US, DEFAULT_LATENCY_PERCENT = 3000, 95
RESCAN_SECONDS = 60.0
"""How often a managed cgroup's files are read for devices left by others (the executor's force period)."""
_MODEL_KEYS = (
    ("rbps", "model_read_bps"),
    ("rseqiops", "model_read_seq_iops"),
    ("rrandiops", "model_read_rand_iops"),
    ("wbps", "model_write_bps"),
    ("wseqiops", "model_write_seq_iops"),
    ("wrandiops", "model_write_rand_iops"),
)


def _int(value: int | None, default: int) -> int:
    return default if value is None or value < 0 else value


def device_values(io: api.IOCfg) -> dict[str, str]:
    """Throttles and weight of one block's ``ioCfg`` (koordlet's defaults: no limit, 100 %)."""
    out = {resource: str(_int(getattr(io, field), 0)) for field, resource in THROTTLES.items()}
    out[WEIGHT] = str(_int(io.io_weight_percent, 100))
    return out


def iocost_values(io: api.IOCfg) -> dict[str, str]:
    """The root's ``blkio.cost.qos`` and ``blkio.cost.model`` settings of one block's ``ioCfg``."""
    qos = (
        f"enable=1 ctrl=user rpct={_int(io.read_latency_percent, DEFAULT_LATENCY_PERCENT)}"
        f" rlat={_int(io.read_latency, DEFAULT_LATENCY_US)}"
        f" wpct={_int(io.write_latency_percent, DEFAULT_LATENCY_PERCENT)}"
        f" wlat={_int(io.write_latency, DEFAULT_LATENCY_US)}"
    )
    if io.enable_user_model:
        model = "ctrl=user " + " ".join(f"{k}={_int(getattr(io, f), 0)}" for k, f in _MODEL_KEYS)
    else:
        model = "ctrl=auto"
    return {COST_QOS: qos, COST_MODEL: model}


def devices_in(text: str | None) -> dict[str, str]:
    """``major:minor`` -> the rest of each device line of a per-device file (v1 form)."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        dev, _, rest = line.strip().partition(" ")
        if ":" in dev and dev.replace(":", "").isdecimal():
            out[dev] = rest.strip()
    return out


def _is_neutral(resource: str, rest: str) -> bool:
    if resource == COST_QOS:
        return "enable=0" in rest.split()
    return rest == NEUTRAL.get(resource)


def _containers(pod: api.PodInfo) -> list[str]:
    return [c.cgroup_dir for c in pod.containers if c.cgroup_dir and c.running]


def _share(value: str, n: int) -> str:
    """A throttle shared by ``n`` cgroups: each gets an equal part, never 0 (which would lift it)."""
    v = int(value)
    return value if v == 0 or n <= 1 else str(max(v // n, 1))


def _merge(into: dict[tuple[str, str], str], values: Mapping[tuple[str, str], str]) -> None:
    """Add ``values``; where a key is set twice (a BE pod under a class limit with its own), the tighter
    throttle wins (0 is no throttle)."""
    for key, v in values.items():
        have = into.get(key)
        if have is None or (key[0] in THROTTLES.values() and have == "0"):
            into[key] = v
        elif key[0] in THROTTLES.values() and v != "0":
            into[key] = str(min(int(have), int(v)))


class BlkIOReconcile(api.QOSPluginBase):
    """Block I/O limits for the besteffort tier, annotated pods and the root's iocost."""

    name = "BlkIOReconcile"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._mine: dict[tuple[str, str], str] = {}
        """``(resource, "<cgroup dir>|<major:minor>")`` -> value, for everything this plugin set."""
        self._refusals = Refusals(ctx)
        self._scanned: dict[str, float] = {}
        """Cgroup dir -> when its files were last read for stale devices."""

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def _device(self, block: api.BlockCfg, where: str) -> str | None:
        name, kind = block.name, block.type or "device"
        if kind != "device":
            self._refusals.once(
                f"{where}: block {name!r} of type {kind!r} skipped: only devices are supported"
            )
            return None
        if not name:
            self._refusals.once(f"{where}: a block without a device name is skipped")
            return None
        try:
            return self.ctx.host.block_device(name)
        except api.KoordletError as err:
            self._refusals.once(f"{where}: block {name!r} skipped: {err}")
            return None

    def targets(self) -> list[tuple[str, tuple[api.BlockCfg, ...], bool, list[str]]]:
        """``(cgroup dir, blocks, is the root, container dirs below)`` of every cgroup managed now."""
        slo = self.ctx.states.node_slo()
        for key in (cfg.LSR_CLASS, cfg.LS_CLASS):
            section = cfg.class_qos(slo, key).blkio_qos
            if section.enable and section.blocks:
                self._refusals.once(f"{key}.blkioQOS is not supported (only beClass, cgroupRoot and pods)")
        tier = self.ctx.host.qos_cgroup_dir(api.KubeQOSClass.BESTEFFORT)
        be, root = slo.resource_qos.be_class.blkio_qos, slo.resource_qos.cgroup_root.blkio_qos
        running = [p for p in self.ctx.states.pods() if p.phase == "Running" and p.cgroup_dir]
        out: list[tuple[str, tuple[api.BlockCfg, ...], bool, list[str]]] = [
            (tier, be.blocks if be.enable else (), False, []),
            ("", root.blocks if root.enable else (), True, []),
        ]
        for pod in running:
            raw = pod.annotations.get(ANNOTATION)
            if raw is None:
                continue
            try:
                parsed = json.loads(raw) if raw else {}
            except ValueError:
                self._refusals.once(f"pod {pod.namespace}/{pod.name}: {ANNOTATION} is not JSON")
                continue
            if isinstance(parsed, Mapping):
                out.append((pod.cgroup_dir, api.blocks(parsed.get("blocks")), False, _containers(pod)))
        if self.ctx.host.cgroup_version() == 1:
            under_tier = [d for p in running if p.cgroup_dir.startswith(tier + "/") for d in _containers(p)]
            out[0] = (tier, out[0][1], False, under_tier)
        return out

    def wanted(self) -> list[api.CgroupUpdate]:
        """Writes of this pass: configured devices (shared out below on v1), then resets of stale ones."""
        per_dir: dict[str, dict[tuple[str, str], str]] = {}
        managed: dict[str, tuple[str, ...]] = {}
        for d, blocks, is_root, below in self.targets():
            files = (COST_QOS, COST_MODEL) if is_root else (*THROTTLES.values(), WEIGHT)
            files = tuple(f for f in files if self.ctx.host.supports(f))
            if not files:
                continue
            configured: dict[tuple[str, str], str] = {}
            for block in blocks:
                dev = self._device(block, d or "cgroup root")
                if dev is None:
                    continue
                values = iocost_values(block.io_cfg) if is_root else device_values(block.io_cfg)
                configured.update({(r, dev): v for r, v in values.items() if r in files})
            _merge(per_dir.setdefault(d, {}), configured)
            managed[d] = files
            shares = {k: _share(v, len(below)) for k, v in configured.items() if k[0] in THROTTLES.values()}
            for c in below:
                _merge(per_dir.setdefault(c, {}), shares)
                managed[c] = tuple(f for f in files if f in THROTTLES.values())
        self._scanned = {d: t for d, t in self._scanned.items() if d in per_dir}
        writes: list[api.CgroupUpdate] = []
        for d, wanted in per_dir.items():
            writes += [self._update(r, d, dev, v, "blkioQOS") for (r, dev), v in wanted.items()]
            writes += self._stale(d, managed[d], {dev for _, dev in wanted})
        return writes

    def _stale(self, d: str, files: Iterable[str], wanted: set[str]) -> list[api.CgroupUpdate]:
        """Resets of devices ``d`` holds a value for but no longer wants: those this plugin set (known
        without reading), and, on first sight of ``d`` and once a minute after, any the files show (left
        by an earlier agent, or by the NodeSLO it had)."""
        now = self.ctx.clock()
        scan = now - self._scanned.get(d, float("-inf")) >= RESCAN_SECONDS
        if scan:
            self._scanned[d] = now
        out: list[api.CgroupUpdate] = []
        for resource in files:
            if resource not in NEUTRAL:
                continue
            devs = {
                where.rpartition("|")[2]
                for r, where in self._mine
                if r == resource and where.startswith(f"{d}|")
            }
            if scan:
                found = devices_in(_shared.read_value(self.ctx, resource, d))
                devs |= {dev for dev, rest in found.items() if not _is_neutral(resource, rest)}
            out += [
                self._update(resource, d, dev, NEUTRAL[resource], "stale device")
                for dev in sorted(devs - wanted)
            ]
        return out

    def _update(self, resource: str, d: str, dev: str, value: str, reason: str) -> api.CgroupUpdate:
        return api.CgroupUpdate(resource, d, f"{dev} {value}", owner=self.name, reason=reason)

    def reconcile(self) -> None:
        with self._lock:
            self._apply(self.wanted())

    def _apply(self, writes: Sequence[api.CgroupUpdate]) -> None:
        results = self.ctx.executor.update_batch(writes)
        for r in results:
            dev, _, value = r.update.value.partition(" ")
            key = (r.update.resource, f"{r.update.cgroup_dir}|{dev}")
            if r.ok and r.skipped != "gone" and value != NEUTRAL.get(r.update.resource):
                self._mine[key] = value
            else:
                self._mine.pop(key, None)
        self._refusals.report(results)

    def shutdown(self) -> None:
        with self._lock:
            resets = []
            for (resource, where), _ in sorted(self._mine.items()):
                d, _, dev = where.rpartition("|")
                if resource in NEUTRAL:
                    resets.append(self._update(resource, d, dev, NEUTRAL[resource], "stop"))
            self._apply(resets)
            self._mine.clear()
            self.ctx.executor.release(self.name)
