"""Network QoS in the contract: what a plugin asks the kernel to hold on one uplink (bits per second).

A plugin builds a :class:`NetQoSSpec` (the link's capacity, the LS and BE classes' guaranteed rate and
ceiling per direction, the pod IPs of each class) and hands it to ``ctx.executor.apply_network_qos``; the
executor validates it, reads the uplink's tc state back and changes only what differs
(``koordlet.system.netqos`` maps the spec to HTB classes and u32 filters). Stdlib only.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from koordshared.runtime.errors import InvalidValue

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MIN_RATE_BPS = 8000
"""HTB needs a positive rate; the system class keeps at least this when LS and BE take the whole link."""
IFNAMSIZ = 16

_IFNAME = re.compile(r"^[A-Za-z0-9_.@:-]{1,15}\Z")


def check_ifname(name: str) -> str:
    """``name`` if it can name a network interface, else :class:`InvalidValue`."""
    if not _IFNAME.match(name) or name in (".", ".."):
        raise InvalidValue("ifname", name, f"not a network interface name (1..{IFNAMSIZ - 1} chars)")
    return name


def default_ifb(uplink: str) -> str:
    """The IFB device for ``uplink``'s ingress: ``kifb-<uplink>``, cut to the interface name limit."""
    return f"kifb-{uplink}"[: IFNAMSIZ - 1]


@dataclass(frozen=True, slots=True)
class ClassLimit:
    """One class's bandwidth in bits per second: ``rate`` guaranteed (its request), ``ceil`` at most."""

    rate_bps: int
    ceil_bps: int


@dataclass(frozen=True, slots=True)
class DirectionSpec:
    """One direction: the link's capacity and the LS and BE classes within it."""

    total_bps: int
    ls: ClassLimit
    be: ClassLimit

    def validate(self, direction: str) -> None:
        if self.total_bps < MIN_RATE_BPS:
            raise InvalidValue(f"{direction}.total", self.total_bps, f"below {MIN_RATE_BPS} bit/s")
        for name, lim in (("ls", self.ls), ("be", self.be)):
            if not MIN_RATE_BPS <= lim.rate_bps <= lim.ceil_bps <= self.total_bps:
                raise InvalidValue(
                    f"{direction}.{name}",
                    f"rate {lim.rate_bps} ceil {lim.ceil_bps}",
                    f"need {MIN_RATE_BPS} <= rate <= ceil <= total ({self.total_bps}) bit/s",
                )
        if self.ls.rate_bps + self.be.rate_bps > self.total_bps:
            raise InvalidValue(
                direction, self.ls.rate_bps + self.be.rate_bps, "LS + BE rates exceed the link"
            )


@dataclass(frozen=True, slots=True)
class NetQoSSpec:
    """Everything the kernel should hold for one uplink. ``ingress`` ``None``: ingress is not shaped
    (and no IFB device exists)."""

    uplink: str
    egress: DirectionSpec
    ingress: DirectionSpec | None = None
    ls_ips: frozenset[IPAddress] = field(default_factory=frozenset)
    be_ips: frozenset[IPAddress] = field(default_factory=frozenset)
    ifb: str = ""
    """The IFB device's name; empty: :func:`default_ifb`."""

    @property
    def ifb_name(self) -> str:
        return self.ifb or default_ifb(self.uplink)

    def validate(self) -> None:
        """Raise :class:`InvalidValue` for anything the kernel would refuse or misapply."""
        check_ifname(self.uplink)
        check_ifname(self.ifb_name)
        if self.ifb_name == self.uplink:
            raise InvalidValue("ifb", self.ifb_name, "the IFB device cannot be the uplink")
        self.egress.validate("egress")
        if self.ingress is not None:
            self.ingress.validate("ingress")
        both = self.ls_ips & self.be_ips
        if both:
            raise InvalidValue("pod IPs", sorted(map(str, both)), "an address cannot be both LS and BE")
