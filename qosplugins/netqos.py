"""``TCNetworkQoS``: LS and BE bandwidth on the node's uplink from NodeSLO ``networkQOS`` (koordlet's tc
runtime hook, under its gate name so Koordinator configs carry over).

Every ``reconcile-interval-seconds`` (the agent's flag, 1 s), when ``--tc-network-qos-uplink`` names a
device (nothing is touched while it is empty) and ``resourceQOSStrategy.policies.netQOSPolicy`` is ``tc``:
the link's capacity is ``systemStrategy.totalNetworkBandwidth``; the ``lsClass`` and ``beClass``
``networkQOS`` give each class's guaranteed rate (``egressRequest``) and ceiling (``egressLimit``) on the
uplink's egress, and likewise for ingress (through an IFB device) when a class sets an ingress value.
Integers are percents of the capacity, strings quantities in bits per second (``50M``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import ipaddress
import threading

from koordlet import api
from qosplugins._refusals import Refusals

UPLINK = api.Flag(
    "tc-network-qos-uplink",
    str,
    "",
    "network interface TCNetworkQoS shapes (egress HTB, ingress through an IFB device); empty: none",
)
LS_QOS = frozenset({api.QOSClass.LSE, api.QOSClass.LSR, api.QOSClass.LS})


def _limit(rate: int, ceil: int, total: int) -> api.ClassLimit:
    """Koordinator's request/limit as HTB rate/ceil: unset ceil is the link, rate at least HTB's minimum."""
    top = total if ceil <= 0 else min(ceil, total)
    top = max(top, api.MIN_RATE_BPS)
    return api.ClassLimit(min(max(rate, api.MIN_RATE_BPS), top), top)


def direction(total: int, ls: api.NetworkQOS, be: api.NetworkQOS, *, ingress: bool) -> api.DirectionSpec:
    def of(c: api.NetworkQOS) -> api.ClassLimit:
        if not c.enable:
            return _limit(0, 0, total)
        if ingress:
            return _limit(c.ingress_request_bps, c.ingress_limit_bps, total)
        return _limit(c.egress_request_bps, c.egress_limit_bps, total)

    return api.DirectionSpec(total, of(ls), of(be))


def build_spec(uplink: str, slo: api.NodeSLO, pods: list[api.PodInfo]) -> api.NetQoSSpec | None:
    """The spec the NodeSLO asks for on ``uplink``; ``None`` when network QoS is off."""
    if slo.resource_qos.policies.net_qos_policy != "tc" or slo.total_network_bandwidth_bps <= 0:
        return None
    ls, be = slo.resource_qos.ls_class.network_qos, slo.resource_qos.be_class.network_qos
    if not ls.enable and not be.enable:
        return None
    total = slo.total_network_bandwidth_bps
    shaped_in = any(c.enable and (c.ingress_request_bps > 0 or c.ingress_limit_bps > 0) for c in (ls, be))
    ls_ips: set[api.IPAddress] = set()
    be_ips: set[api.IPAddress] = set()
    for pod in pods:
        if not pod.is_active or pod.host_network:
            continue
        target = be_ips if pod.is_best_effort else ls_ips if pod.qos in LS_QOS else None
        if target is not None:
            target.update(ipaddress.ip_address(ip) for ip in pod.ips)
    return api.NetQoSSpec(
        uplink,
        egress=direction(total, ls, be, ingress=False),
        ingress=direction(total, ls, be, ingress=True) if shaped_in else None,
        ls_ips=frozenset(ls_ips),
        be_ips=frozenset(be_ips - ls_ips),
    )


class TCNetworkQoS(api.QOSPluginBase):
    """HTB classes for LS and BE on one uplink, pods classified by IP."""

    name = "TCNetworkQoS"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def init_flags(self, flags: api.FlagSet) -> None:
        flags.add(UPLINK)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self.uplink = ctx.option(UPLINK)
        self._applied = False
        self._refusals = Refusals(ctx)

    def run(self, stop: threading.Event) -> None:
        if not self.uplink:
            self.ctx.logger.warning("no --%s: network QoS touches nothing", UPLINK.name)
            return
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def reconcile(self) -> None:
        with self._lock:
            spec = build_spec(self.uplink, self.ctx.states.node_slo(), list(self.ctx.states.pods()))
            if spec is None:
                if self._applied:
                    self._remove("network QoS off in the NodeSLO")
                return
            res = self.ctx.executor.apply_network_qos(spec, owner=self.name, reason="networkQOS")
            if res.ok:
                self._applied = True
                if res.written:
                    self.ctx.logger.info("%s: %s", self.uplink, res.update.value)
            self._refusals.report([res])

    def _remove(self, reason: str) -> None:
        res = self.ctx.executor.remove_network_qos(self.uplink, owner=self.name, reason=reason)
        if res.ok:
            self._applied = False
        self._refusals.report([res])

    def shutdown(self) -> None:
        with self._lock:
            if self.uplink:
                # also after a restart that found our tree in place: removal of nothing is a no-op
                self._remove("stop")
            self.ctx.executor.release(self.name)
