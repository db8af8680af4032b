"""Network QoS at kernel level, the model: what tc state a spec wants, and the steps from what is there.

Layer: ``koordlet.system``; pure (the netlink side is :mod:`koordlet.system.tcnetlink`). On the uplink an
HTB root ``1:`` whose classes follow Koordinator's tc plugin: ``1:1`` the link (rate = ceil = total),
``1:2`` system and unclassified traffic (the default; guaranteed what LS and BE are not), ``1:3`` LS and
``1:4`` BE (rate = the class's request, its guaranteed share; ceil = its limit), priorities 1/2/3 so
spare bandwidth goes to system, then LS, then BE. That shapes egress. Ingress is shaped the same way on
an IFB device that the uplink's ``ingress`` qdisc redirects every packet to (``mirred``).
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from koordlet.api.netqos import MIN_RATE_BPS, DirectionSpec, IPAddress

Match = Literal["src", "dst"]

QDISC = 0x10000
"""``1:`` the HTB root qdisc."""
ROOT_CLASS, SYSTEM_CLASS, LS_CLASS, BE_CLASS = 0x10001, 0x10002, 0x10003, 0x10004
SYSTEM_PRIO, LS_PRIO, BE_PRIO = 1, 2, 3
DEFAULT_MINOR = SYSTEM_CLASS & 0xFFFF
INGRESS_QDISC = 0xFFFF0000
POD_FILTER_PRIO = {4: 10, 6: 11}
"""u32 priority of pod IP filters by IP version: all of one version share a hash table (their classid
says the class); the kernel keeps one protocol per priority, hence two."""
REDIRECT_PRIO = 1
ETH_P_ALL, ETH_P_IP, ETH_P_IPV6 = 0x0003, 0x0800, 0x86DD

# offsets of the addresses from the start of the network header
_V4_OFF: Mapping[str, int] = MappingProxyType({"src": 12, "dst": 16})
_V6_OFF: Mapping[str, int] = MappingProxyType({"src": 8, "dst": 24})


def handle_str(handle: int) -> str:
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


# ---------------------------------------------------------------------------------------------------
# Desired and current state
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HTBClass:
    """An HTB class as the kernel keeps it: rates in bytes per second."""

    handle: int
    parent: int
    rate: int
    ceil: int
    prio: int

    def describe(self) -> str:
        return (
            f"class {handle_str(self.handle)} parent {handle_str(self.parent)} "
            f"rate {self.rate * 8}bit ceil {self.ceil * 8}bit prio {self.prio}"
        )


@dataclass(frozen=True, slots=True)
class IPFilter:
    """A u32 filter sending packets whose ``match`` address is ``ip`` to class ``classid``."""

    ip: IPAddress
    classid: int
    match: Match

    @property
    def protocol(self) -> int:
        return ETH_P_IP if self.ip.version == 4 else ETH_P_IPV6

    def selector_keys(self) -> list[str]:
        """u32 keys ``value/mask+offset`` (offsets from the network header), one per 32-bit word."""
        packed = self.ip.packed
        base = (_V4_OFF if self.ip.version == 4 else _V6_OFF)[self.match]
        return [
            f"0x{int.from_bytes(packed[i : i + 4], 'big'):08x}/0xffffffff+{base + i}"
            for i in range(0, len(packed), 4)
        ]

    def describe(self) -> str:
        return f"filter u32 match ip {self.match} {self.ip} flowid {handle_str(self.classid)}"


def ip_from_keys(protocol: int, keys: Iterable[tuple[int, int, int]]) -> tuple[IPAddress, Match] | None:
    """The exact-address match of u32 ``(mask, value, offset)`` keys, or ``None`` if they are not one."""
    ks = sorted(keys, key=lambda k: k[2])
    if not ks or any(mask != 0xFFFFFFFF for mask, _, _ in ks):
        return None
    offsets = [off for _, _, off in ks]
    table, words = (_V4_OFF, 1) if protocol == ETH_P_IP else (_V6_OFF, 4)
    if protocol not in (ETH_P_IP, ETH_P_IPV6) or len(ks) != words:
        return None
    for match, base in table.items():
        if offsets == [base + 4 * i for i in range(words)]:
            raw = b"".join(v.to_bytes(4, "big") for _, v, _ in ks)
            return ipaddress.ip_address(raw), match  # type: ignore[return-value]
    return None


@dataclass(frozen=True, slots=True)
class Tree:
    """An HTB tree on one device: its classes (root first) and pod filters."""

    classes: tuple[HTBClass, ...]
    filters: frozenset[IPFilter]


def _bytes(bps: int) -> int:
    return max(bps // 8, 1)


def build_tree(
    d: DirectionSpec, ls_ips: Iterable[IPAddress], be_ips: Iterable[IPAddress], match: Match
) -> Tree:
    total = _bytes(d.total_bps)
    system_rate = max(d.total_bps - d.ls.rate_bps - d.be.rate_bps, MIN_RATE_BPS)
    classes = (
        HTBClass(ROOT_CLASS, QDISC, total, total, 0),
        HTBClass(SYSTEM_CLASS, ROOT_CLASS, _bytes(system_rate), total, SYSTEM_PRIO),
        HTBClass(LS_CLASS, ROOT_CLASS, _bytes(d.ls.rate_bps), _bytes(d.ls.ceil_bps), LS_PRIO),
        HTBClass(BE_CLASS, ROOT_CLASS, _bytes(d.be.rate_bps), _bytes(d.be.ceil_bps), BE_PRIO),
    )
    filters = frozenset(IPFilter(ip, LS_CLASS, match) for ip in ls_ips) | frozenset(
        IPFilter(ip, BE_CLASS, match) for ip in be_ips
    )
    return Tree(classes, filters)


@dataclass(frozen=True, slots=True)
class FilterState:
    """A u32 key node the kernel lists (hash-table nodes are not listed)."""

    handle: int
    prio: int
    protocol: int
    classid: int | None = None
    ip: IPAddress | None = None
    match: Match | None = None
    redirect_ifindex: int | None = None
    """The ``mirred`` redirect target, for the ingress filter."""


@dataclass(frozen=True, slots=True)
class LinkState:
    """The tc state of one device as read back."""

    ifname: str
    index: int
    up: bool = True
    root_kind: str = ""
    root_handle: int = 0
    root_default: int | None = None
    ingress: bool = False
    classes: Mapping[int, HTBClass] = field(default_factory=lambda: MappingProxyType({}))
    filters: tuple[FilterState, ...] = ()
    """Filters attached at ``1:``."""
    ingress_filters: tuple[FilterState, ...] = ()

    @property
    def has_our_root(self) -> bool:
        return self.root_kind == "htb" and self.root_handle == QDISC


@dataclass(frozen=True, slots=True)
class NetQoSState:
    uplink: LinkState | None
    """``None``: no device of the uplink's name."""
    ifb: LinkState | None
    """``None``: no device of the IFB's name."""
