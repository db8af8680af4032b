"""tc state writes for the executor (network QoS): one spec per uplink, applied by difference.

Layer: ``koordlet.resourceexecutor``. Same guarantees as cgroup writes: the spec is validated before
netlink is touched (``NetQoSSpec.validate``); the kernel state is read back and only the steps that
differ are carried out (``koordlet.system.tcplan``), so an unchanged spec writes nothing; the last spec
per uplink is cached and re-checked every force period while owned, which repairs out-of-band changes;
every step is audited (``tc`` events naming the step); dry run logs the steps; a refused step stops the
pass (later steps build on it) and is reported with its errno. :meth:`TCWrites.remove` deletes
everything ours from an uplink (root HTB, ingress redirect, IFB device).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from koordlet.api import CgroupUpdate, UpdateResult
from koordlet.api.netqos import DirectionSpec, NetQoSSpec, check_ifname, default_ifb
from koordlet.resourceexecutor.context import WriteContext
from koordlet.resourceexecutor.metrics import errno_kind
from koordlet.system.netqos import NetQoSState
from koordlet.system.tcplan import Op, plan, plan_removal
from koordshared.runtime.errors import InvalidValue

log = logging.getLogger(__name__)

RESOURCE = "tc"


class TCBackend(Protocol):
    """The netlink side (``koordlet.system.tcnetlink.NetlinkTC``); a fake one in unit tests."""

    def read(self, uplink: str, ifb: str) -> NetQoSState: ...

    def execute(self, op: Op) -> None: ...

    def close(self) -> None: ...


BackendFactory = Callable[[str], TCBackend]
"""Opens a backend in a network namespace (``""``: the agent's own)."""


def netlink_backend(netns: str) -> TCBackend:
    from koordlet.system.tcnetlink import NetlinkTC

    return NetlinkTC(netns)


def summary(spec: NetQoSSpec) -> str:
    """A one-line description of a spec (the ``value`` of its results)."""

    def d(name: str, x: DirectionSpec) -> str:
        ls, be = x.ls, x.be
        return f"{name} total {x.total_bps} LS {ls.rate_bps}/{ls.ceil_bps} BE {be.rate_bps}/{be.ceil_bps}"

    parts = [d("egress", spec.egress)]
    if spec.ingress is not None:
        parts.append(d(f"ingress via {spec.ifb_name}", spec.ingress))
    parts.append(f"{len(spec.ls_ips)} LS and {len(spec.be_ips)} BE pod IPs")
    return "; ".join(parts)


@dataclass(slots=True)
class _Owned:
    spec: NetQoSSpec
    owner: str
    reason: str
    checked: float


class TCWrites:
    """Owned by a ``ResourceExecutor``; shares its :class:`WriteContext`."""

    def __init__(
        self, ctx: WriteContext, *, netns: str = "", backend: BackendFactory = netlink_backend
    ) -> None:
        self._ctx = ctx
        self.netns = netns
        self._backend = backend
        self._owned: dict[str, _Owned] = {}

    def apply(self, spec: NetQoSSpec, *, owner: str, reason: str = "", force: bool = False) -> UpdateResult:
        """Make the kernel hold ``spec`` on its uplink; ``written`` if any step was carried out."""
        u = CgroupUpdate(RESOURCE, spec.uplink, "", owner, reason, cacheable=True)
        with self._ctx.lock:
            try:
                spec.validate()
            except InvalidValue as err:
                return self._ctx.failed(u, "invalid", f"refused before touching the kernel: {err}")
            u = CgroupUpdate(RESOURCE, spec.uplink, summary(spec), owner, reason)
            now = self._ctx.clock()
            owned = self._owned.get(spec.uplink)
            if (
                not force
                and owned is not None
                and owned.spec == spec
                and now - owned.checked < self._ctx.force_seconds
            ):
                return UpdateResult(u, False, skipped="unchanged")
            res = self._run(u, lambda state: plan(spec, state), spec.uplink, spec.ifb_name)
            if res.ok and res.skipped != "dry-run":
                self._owned[spec.uplink] = _Owned(spec, owner, reason, now)
            return res

    def remove(self, uplink: str, *, owner: str, reason: str = "", ifb: str = "") -> UpdateResult:
        """Delete our root HTB, ingress redirect and IFB device from ``uplink`` (stop, or gate off)."""
        u = CgroupUpdate(RESOURCE, uplink, "remove", owner, reason, cacheable=False)
        with self._ctx.lock:
            try:
                check_ifname(uplink)
                ifb_name = check_ifname(ifb or default_ifb(uplink))
            except InvalidValue as err:
                return self._ctx.failed(u, "invalid", f"refused: {err}")
            self._owned.pop(uplink, None)
            return self._run(u, lambda state: plan_removal(state, ifb_name), uplink, ifb_name)

    def state(self, uplink: str, ifb: str = "") -> NetQoSState:
        """What the kernel holds now (read only)."""
        backend = self._backend(self.netns)
        try:
            return backend.read(uplink, ifb or default_ifb(uplink))
        finally:
            backend.close()

    def reconcile_owned(self) -> list[UpdateResult]:
        """Re-check owned specs last checked a force period ago and repair what differs."""
        with self._ctx.lock:
            now = self._ctx.clock()
            due = [o for o in self._owned.values() if now - o.checked >= self._ctx.force_seconds]
            return [self.apply(o.spec, owner=o.owner, reason=o.reason or "force", force=True) for o in due]

    def release(self, owner: str) -> None:
        with self._ctx.lock:
            for uplink in [k for k, o in self._owned.items() if o.owner == owner]:
                del self._owned[uplink]

    def _run(
        self, u: CgroupUpdate, planner: Callable[[NetQoSState], list[Op]], uplink: str, ifb: str
    ) -> UpdateResult:
        try:
            backend = self._backend(self.netns)
        except ImportError as err:
            log.warning("network QoS unavailable: %s", err)
            self._ctx.metrics.count_error(RESOURCE, "unsupported")
            return UpdateResult(u, False, skipped="unsupported")
        except OSError as err:
            return self._ctx.failed(
                u, errno_kind(err.errno), f"cannot open rtnetlink in {self.netns or 'host'}: {err}"
            )
        try:
            try:
                state = backend.read(uplink, ifb)
                if state.uplink is None and u.value != "remove":
                    return self._ctx.failed(u, "enodev", f"no network interface {uplink!r} to shape")
                ops = planner(state)
            except OSError as err:
                return self._ctx.failed(
                    u, errno_kind(err.errno), f"reading tc state of {uplink} failed: {err}"
                )
            if not ops:
                return UpdateResult(u, False, skipped="unchanged")
            if self._ctx.dry_run:
                for op in ops:
                    log.info("dry-run: would %s (owner %s: %s)", op.describe(), u.owner, u.reason)
                return UpdateResult(u, False, skipped="dry-run")
            for done, op in enumerate(ops):
                try:
                    backend.execute(op)
                except OSError as err:
                    code = err.errno or errno.EIO
                    return self._ctx.failed(
                        u, errno_kind(code), f"{err} (after {done} of {len(ops)} steps; owner {u.owner})"
                    )
                self._ctx.audit.record(
                    owner=u.owner,
                    reason=u.reason,
                    resource=RESOURCE,
                    path=op.dev,
                    before=None,
                    after=op.describe(),
                )
            return UpdateResult(u, True)
        finally:
            backend.close()
