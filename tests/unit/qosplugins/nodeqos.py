"""A plugin's context on a FakeHost tree: the agent's real Host and ResourceExecutor, fake states and
clock. The node QoS plugins' tests run against it, so what they check is what the kernel files hold."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koordlet import api
from koordlet.metrics import PluginMetrics
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native
from koordlet.testing import FakeClock, FakeEvictor, FakeMetrics, FakeStates, make_node
from koordlet.testing.builders import QOS_TIER
from koordshared.apis.slo import nodeslo
from tests.support.fakehost import FakeHost

GI = 1 << 30
MI = 1 << 20


_V1_DEVICE_FILES = frozenset(
    {
        "blkio.throttle.read_bps_device",
        "blkio.throttle.write_bps_device",
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_iops_device",
        "blkio.cost.weight",
    }
)
_IO_MAX_KEYS = ("rbps", "wbps", "riops", "wiops")


def _merge_line(name: str, old: str, value: str) -> str:
    """The file after writing ``value`` (one device) to a per-device file, as the kernel keeps it."""
    dev, _, rest = value.strip().partition(" ")
    lines = {ln.split()[0]: ln for ln in old.splitlines() if ln.strip()}
    if name == "io.max":
        have = dict(kv.split("=") for kv in lines.get(dev, dev).split()[1:]) or dict.fromkeys(
            _IO_MAX_KEYS, "max"
        )
        have.update((k, v) for k, v in (kv.split("=") for kv in rest.split()))
        lines[dev] = f"{dev} " + " ".join(f"{k}={have[k]}" for k in _IO_MAX_KEYS)
        if all(have[k] == "max" for k in _IO_MAX_KEYS):
            del lines[dev]
    elif (name in _V1_DEVICE_FILES and rest == "0") or (name == "io.weight" and rest == "default"):
        lines.pop(dev, None)
    else:
        lines[dev] = f"{dev} {rest}"
    return "".join(f"{ln}\n" for ln in lines.values())


def kernel_like_writer(items: Sequence[tuple[str | Path, str | bytes]]) -> list[int]:
    """The executor's writer with the kernel's per-device semantics (a write changes one device's line)."""
    out: list[int] = []
    for path, raw in items:
        text = raw.decode() if isinstance(raw, bytes) else raw
        p = Path(path)
        if (p.name in _V1_DEVICE_FILES or p.name in ("io.max", "io.weight")) and p.exists():
            text = _merge_line(p.name, p.read_text(), text)
        out.append(native.write_batch([(p, text)])[0])
    return out


class NodeQoSEnv:
    """Everything a node QoS plugin touches, on ``fake``; ``v2`` switches the tree to cgroup v2 first."""

    def __init__(self, fake: FakeHost, *, v2: bool = False, **executor: Any) -> None:
        if v2:
            fake.use_cgroup_v2()
        self.fake = fake
        for tier in QOS_TIER.values():
            fake.mkcgroup(None, tier)
        self.clock = FakeClock()
        self.host = fake.host()
        self.executor = ResourceExecutor(
            fake.paths,
            config=ExecutorConfig(**executor),
            clock=self.clock,
            wall_clock=self.clock.wall,
            registry=CollectorRegistry(),
            mode=fake.mode,
            online_cpus=lambda: frozenset(range(4)),
            writer=kernel_like_writer,
        )
        self.states = FakeStates(make_node(4000, 16 * GI, memory_allocatable_bytes=15 * GI))
        self.registry = CollectorRegistry()
        self.scheduled: list[tuple[float, Callable[[], None]]] = []
        self.options: dict[str, api.OptionValue] = {}

    def slo(self, spec: Mapping[str, Any]) -> None:
        """The NodeSLO in force: ``spec`` validated and merged over the defaults, as the agent does."""
        self.states.slo = nodeslo.build(spec, generation=self.states.slo.generation + 1)

    def add_pod(self, pod: api.PodInfo, **files: str) -> api.PodInfo:
        """``pod`` and its containers' cgroups, each with ``files`` (resource -> kernel text)."""
        for d in [pod.cgroup_dir] + [c.cgroup_dir for c in pod.containers]:
            self.fake.mkcgroup(None, d)
            for resource, text in files.items():
                self.fake.write_cgroup(resource, d, text)
        self.states.pod_list.append(pod)
        return pod

    def tier_files(self, **files: str) -> None:
        for tier in QOS_TIER.values():
            for resource, text in files.items():
                self.fake.write_cgroup(resource, tier, text)

    def read(self, resource: str, cgroup_dir: str) -> str:
        return self.fake.read_cgroup(resource, cgroup_dir)

    def context(self, name: str) -> api.PluginContext:
        return api.PluginContext(
            node_name="node-1",
            options=self.options,
            states=self.states,
            metrics=FakeMetrics(self.clock),
            host=self.host,
            executor=self.executor,
            evictor=FakeEvictor(),
            clock=self.clock,
            logger=logging.getLogger(f"test.{name}"),
            every=lambda interval, fn: self.scheduled.append((interval, fn)),
            subscribe=lambda event, fn: None,
            registry=PluginMetrics(self.registry),
            wall_clock=self.clock.wall,
        )

    def start(self, plugin: api.QOSPlugin) -> api.QOSPlugin:
        flags = api.FlagSet(plugin.name)
        plugin.init_flags(flags)
        for flag in flags:
            self.options.setdefault(flag.name, flag.default)
        plugin.setup(self.context(plugin.name))
        plugin.run(threading.Event())
        return plugin

    def tick(self) -> None:
        for _, fn in list(self.scheduled):
            fn()
