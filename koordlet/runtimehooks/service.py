"""The runtime hooks as one agent component: the hooks the feature gates turn on, the rule they read, the
reconciler that applies them, the guard that restores them (Koordinator's ``runtimehooks.go``).

Gates and defaults are Koordinator's: ``GroupIdentity``, ``CPUSetAllocator`` and ``BatchResource`` on,
``CoreSched`` and ``OOMScoreAdj`` off. A hook the kernel cannot serve (``cpu.bvt_warp_ns`` is an Alibaba
Cloud Linux/Anolis file; core scheduling needs Linux 5.14+ with ``CONFIG_SCHED_CORE``) says so once at
start and answers nothing; the NodeSLO asking for it then is warned about once per change. The rule is
rebuilt from the NodeSLO and the node topology status (share pools, kubelet policy, system-QoS CPUs) for
each pass; the reconciler re-asks every pod when it changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from koordlet import api
from koordlet.runtimehooks import coresched, groupidentity
from koordlet.runtimehooks.batchresource import BatchResource
from koordlet.runtimehooks.config import HooksConfig
from koordlet.runtimehooks.coresched import CoreSched
from koordlet.runtimehooks.cpuset import CPUSetAllocator
from koordlet.runtimehooks.groupidentity import GroupIdentity
from koordlet.runtimehooks.guard import Guard
from koordlet.runtimehooks.oomscoreadj import OOMScoreAdj
from koordlet.runtimehooks.protocol import Hook, Rule
from koordlet.runtimehooks.reconciler import PassReport, Reconciler
from koordlet.runtimehooks.writes import ProcessWriter
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths
from koordshared.apis.topology import noderesourcetopology as nrt
from koordshared.apis.topology.noderesourcetopology import NodeTopologyStatus
from koordshared.runtime.errors import InvalidValue
from koordshared.runtime.lifecycle import Supervisor
from koordshared.runtime.logs import OncePerChange

log = logging.getLogger(__name__)
_asked = OncePerChange(log)

HOOKS: Mapping[str, Callable[[], Hook]] = {
    "GroupIdentity": GroupIdentity,
    "CPUSetAllocator": CPUSetAllocator,
    "BatchResource": BatchResource,
    "OOMScoreAdj": OOMScoreAdj,
    "CoreSched": CoreSched,
}
"""Every hook by its gate, in the order answers are merged (a later hook's value wins)."""


@dataclass(frozen=True, slots=True)
class _TopologyRule:
    """The parts of the rule read from the node topology status (``None`` pools: not known yet)."""

    share_pools: tuple[nrt.CPUSharedPool, ...] | None = None
    be_share_pools: tuple[nrt.CPUSharedPool, ...] = ()
    kubelet_policy: str = ""
    system_qos_cpuset: str = ""


class RuntimeHooks:
    def __init__(
        self,
        config: HooksConfig,
        states: api.StatesReader,
        host: api.HostReader,
        writer: api.ResourceWriter,
        topology: Callable[[], NodeTopologyStatus | None],
        *,
        procs: ProcessWriter | None = None,
        guard: tuple[HostPaths, CgroupMode] | None = None,
        group_identity_why: str | None = None,
        core_sched_why: str | None = None,
        on_pass: Callable[[PassReport], None] | None = None,
        on_hook: Callable[[str, str, float, bool], None] | None = None,
        refresh_pods: Callable[[], object] | None = None,
    ) -> None:
        """``guard``: the host roots and cgroup version to watch (no guard without); ``group_identity_why`` /
        ``core_sched_why``: why this kernel cannot serve that hook (``None``: it can)."""
        self.config = config
        self.states = states
        self.topology = topology
        self.hooks = tuple(factory() for name, factory in HOOKS.items() if name in config.enabled)
        self.unsupported = {
            name: why
            for name, why in (("GroupIdentity", group_identity_why), ("CoreSched", core_sched_why))
            if name in config.enabled and why is not None
        }
        for name, why in self.unsupported.items():
            log.info("runtime hook %s: %s; it stays idle", name, why)
        self._memo: tuple[NodeTopologyStatus | None, _TopologyRule] | None = None
        self.reconciler = Reconciler(
            self.hooks,
            states,
            host,
            writer,
            self.rule,
            procs=procs,
            interval=config.reconcile_interval,
            on_pass=on_pass,
            on_hook=None if on_hook is None else lambda h, s, t, ok: on_hook(h, s.value, t, ok),
            on_managed=self._managed,
            refresh=refresh_pods,
            guarded=self._guarded,
        )
        self.guard = (
            Guard(guard[0], guard[1], lambda uids: self.reconciler.request(verify=uids))
            if config.guard and guard is not None
            else None
        )

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hooks]

    def _topology_rule(self, status: NodeTopologyStatus | None) -> _TopologyRule:
        memo = self._memo
        if memo is not None and memo[0] is status:
            return memo[1]
        got = _TopologyRule()
        if status is not None:
            a = status.annotations
            try:
                got = _TopologyRule(
                    nrt.share_pools(a),
                    nrt.share_pools(a, nrt.ANNOTATION_BE_CPU_SHARED_POOLS),
                    nrt.kubelet_cpu_manager_policy(a).policy,
                    nrt.system_qos_resource(a).cpuset,
                )
            except InvalidValue as err:  # the agent wrote these itself: a bug, not an input problem
                log.error("runtime hooks: node topology unreadable: %s", err)
        self._memo = (status, got)
        return got

    def rule(self) -> Rule:
        slo = self.states.node_slo()
        topo = self._topology_rule(self.topology())
        for name, asked in (
            ("GroupIdentity", groupidentity.enabled(slo)),
            ("CoreSched", coresched.enabled(slo)),
        ):
            why = self.unsupported.get(name)
            if why is not None and asked:
                _asked.warning(name, f"the NodeSLO asks for {name}, which this node cannot do: {why}")
            elif why is not None:
                _asked.forget(name)
        return Rule(
            slo=slo,
            share_pools=topo.share_pools,
            be_share_pools=topo.be_share_pools,
            kubelet_policy=topo.kubelet_policy,
            system_qos_cpuset=topo.system_qos_cpuset,
            be_cpu_manager=self.config.be_cpu_manager,
            unset_cpu_quota=self.config.unset_cpu_quota,
            group_identity="GroupIdentity" not in self.unsupported,
            core_sched="CoreSched" not in self.unsupported,
        )

    def _guarded(self) -> frozenset[str]:
        return self.guard.guarded() if self.guard is not None else frozenset()

    def _managed(self, dirs: Mapping[str, tuple[str, ...]]) -> None:
        if self.guard is not None:
            self.guard.watch(dirs)

    def start(self, stop: threading.Event, supervisor: Supervisor) -> None:
        if not self.hooks:
            return
        supervisor.go("runtimehooks-reconciler", lambda: self.reconciler.run(stop))
        if self.guard is not None:
            guard = self.guard
            supervisor.go("runtimehooks-guard", lambda: guard.run(stop))

    def shutdown(self) -> None:
        self.reconciler.shutdown()
        if self.guard is not None:
            self.guard.close()

    def status(self) -> dict[str, api.JSONValue]:
        return {
            "hooks": list(self.names),
            "unsupported": dict(self.unsupported),
            "passes": self.reconciler.passes,
            "guardEvents": self.guard.events if self.guard is not None else 0,
        }


def hooks_for(gates: Callable[[str], bool]) -> frozenset[str]:
    return frozenset(name for name in HOOKS if gates(name))
