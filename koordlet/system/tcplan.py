"""The steps from the tc state read back to the state a :class:`~koordlet.system.netqos.NetQoSSpec` wants.

Layer: ``koordlet.system``; pure. Only what differs becomes a step, so applying an unchanged spec plans
nothing and touches nothing. Steps are ordered so the kernel accepts each: filters that go are deleted
before classes (a class that a filter points to is busy), classes are made root first, an IFB device and
its tree exist before the uplink's ingress starts redirecting to it, and removal stops the redirect first.
Only our objects are changed: the root ``1:`` HTB (a different root qdisc is replaced), our classes,
pod filters at our priorities, the ``ingress`` qdisc's redirect and the IFB device of our name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from koordlet.api.netqos import NetQoSSpec
from koordlet.system.netqos import (
    DEFAULT_MINOR,
    POD_FILTER_PRIO,
    QDISC,
    REDIRECT_PRIO,
    HTBClass,
    IPFilter,
    LinkState,
    Match,
    NetQoSState,
    Tree,
    build_tree,
    handle_str,
)

OpKind = Literal[
    "replace-root",
    "delete-root",
    "add-class",
    "change-class",
    "del-class",
    "add-filter",
    "replace-filter",
    "del-filter",
    "create-ifb",
    "up-ifb",
    "delete-ifb",
    "add-ingress",
    "delete-ingress",
    "add-redirect",
    "del-redirect",
]


@dataclass(frozen=True, slots=True)
class Op:
    """One netlink change on device ``dev``."""

    kind: OpKind
    dev: str
    cls: HTBClass | None = None
    flt: IPFilter | None = None
    handle: int = 0
    """The class or filter handle a delete or replace acts on."""
    prio: int = 0
    protocol: int = 0
    target: str = ""
    """The IFB device a redirect sends to."""

    def describe(self) -> str:
        """The change in ``tc`` words, for the audit log."""
        if self.cls is not None:
            return f"dev {self.dev}: {self.kind} {self.cls.describe()}"
        if self.flt is not None:
            where = f" handle {self.handle:x}" if self.handle else ""
            return f"dev {self.dev}: {self.kind}{where} {self.flt.describe()}"
        if self.kind == "del-class":
            return f"dev {self.dev}: del-class {handle_str(self.handle)}"
        if self.kind == "del-filter":
            return f"dev {self.dev}: del-filter prio {self.prio} handle {self.handle:x}"
        if self.kind == "replace-root":
            return f"dev {self.dev}: replace-root htb handle 1: default {DEFAULT_MINOR:x}"
        if self.kind == "add-redirect":
            return f"dev {self.dev}: add-redirect ingress -> mirred egress redirect dev {self.target}"
        return f"dev {self.dev}: {self.kind}"


def _filter_prio(f: IPFilter) -> int:
    return POD_FILTER_PRIO[f.ip.version]


def plan_tree(dev: str, want: Tree, have: LinkState, match: Match) -> list[Op]:
    """Steps making ``dev``'s root HTB, classes and pod filters equal to ``want``."""
    ops: list[Op] = []
    current = have
    if not have.has_our_root or have.root_default != DEFAULT_MINOR:
        if have.has_our_root:
            ops.append(Op("delete-root", dev))  # HTB cannot change its default class in place
        ops.append(Op("replace-root", dev))
        current = LinkState(have.ifname, have.index, have.up)  # a new root starts empty
    wanted_classes = {c.handle: c for c in want.classes}
    wanted_filters = {f.ip: f for f in want.filters}
    kept: dict[object, tuple[int, int | None]] = {}
    for f in current.filters:
        if f.prio not in POD_FILTER_PRIO.values():
            continue  # not ours
        duplicate = f.ip in kept
        if f.ip is None or f.match != match or duplicate or f.ip not in wanted_filters:
            ops.append(Op("del-filter", dev, handle=f.handle, prio=f.prio, protocol=f.protocol))
            continue
        kept[f.ip] = (f.handle, f.classid)
    # Classes we did not make are deleted, unless a filter that is not ours sends traffic to them (or
    # to a child): the kernel would refuse (EBUSY), and the filter's owner still uses them.
    used = {f.classid for f in current.filters if f.prio not in POD_FILTER_PRIO.values()}
    for c in sorted(current.classes.values(), key=lambda c: -c.handle):
        if c.handle in used:
            used.add(c.parent)
    strays = [c for h, c in current.classes.items() if h not in wanted_classes and h not in used]
    # children before their parents: the root class (parent 1:) last
    for c in sorted(strays, key=lambda c: (c.parent == QDISC, -c.handle)):
        ops.append(Op("del-class", dev, handle=c.handle))
    for c in want.classes:
        have_cls = current.classes.get(c.handle)
        if have_cls is None:
            ops.append(Op("add-class", dev, cls=c))
        elif (have_cls.parent, have_cls.rate, have_cls.ceil, have_cls.prio) != (
            c.parent,
            c.rate,
            c.ceil,
            c.prio,
        ):
            ops.append(Op("change-class", dev, cls=c))
    for ip, w in sorted(wanted_filters.items(), key=lambda kv: (kv[0].version, int(kv[0]))):
        if ip in kept:
            handle, classid = kept[ip]
            if classid != w.classid:
                ops.append(
                    Op("replace-filter", dev, flt=w, handle=handle, prio=_filter_prio(w), protocol=w.protocol)
                )
        else:
            ops.append(Op("add-filter", dev, flt=w, prio=_filter_prio(w), protocol=w.protocol))
    return ops


def _redirect_ok(uplink: LinkState, ifb: LinkState | None) -> bool:
    ours = [f for f in uplink.ingress_filters if f.prio == REDIRECT_PRIO]
    return ifb is not None and len(ours) == 1 and ours[0].redirect_ifindex == ifb.index


def plan(spec: NetQoSSpec, state: NetQoSState) -> list[Op]:
    """Every step from ``state`` to ``spec`` (empty when the kernel already holds it); the uplink
    must exist (``state.uplink`` not ``None``)."""
    up = spec.uplink
    if state.uplink is None:
        raise ValueError(f"no network interface {up!r} to shape")
    uplink = state.uplink
    ops = plan_tree(up, build_tree(spec.egress, spec.ls_ips, spec.be_ips, "src"), uplink, "src")
    ifb_name = spec.ifb_name
    if spec.ingress is None:
        return ops + plan_ingress_removal(state, ifb_name)
    ifb = state.ifb
    if ifb is None:
        ops.append(Op("create-ifb", ifb_name))
        ifb = LinkState(ifb_name, -1)
    elif not ifb.up:
        ops.append(Op("up-ifb", ifb_name))
    ops += plan_tree(ifb_name, build_tree(spec.ingress, spec.ls_ips, spec.be_ips, "dst"), ifb, "dst")
    if not uplink.ingress:
        ops.append(Op("add-ingress", up))
        ops.append(Op("add-redirect", up, target=ifb_name))
    elif not _redirect_ok(uplink, state.ifb):
        if any(f.prio == REDIRECT_PRIO for f in uplink.ingress_filters):
            ops.append(Op("del-redirect", up, prio=REDIRECT_PRIO))
        ops.append(Op("add-redirect", up, target=ifb_name))
    return ops


def plan_ingress_removal(state: NetQoSState, ifb_name: str) -> list[Op]:
    ops: list[Op] = []
    if state.uplink is not None and state.uplink.ingress:
        ops.append(Op("delete-ingress", state.uplink.ifname))
    if state.ifb is not None:
        ops.append(Op("delete-ifb", ifb_name))
    return ops


def plan_removal(state: NetQoSState, ifb_name: str) -> list[Op]:
    """Steps removing everything ours: the redirect first (ingress), then the IFB device, then the root
    HTB (its classes and filters go with it; the kernel's default qdisc comes back)."""
    ops = plan_ingress_removal(state, ifb_name)
    if state.uplink is not None and state.uplink.has_our_root:
        ops.append(Op("delete-root", state.uplink.ifname))
    return ops
