"""Network QoS at kernel level, the netlink side: read back tc state and carry out planned steps (pyroute2).

Layer: ``koordlet.system``. pyroute2 is imported when a :class:`NetlinkTC` is opened, not with this
module (it costs ~0.2 s and only the TCNetworkQoS path needs it). Writes reach here only from the
resource executor (``koordlet.resourceexecutor.tcwrites``). Two pyroute2 details matter: a u32 filter's
``protocol`` is an ethertype (``ETH_P_IP``), not an address family, or it never matches; and pyroute2
0.9 decodes u32 selector keys 4 bytes off, so the selector is decoded here from its raw bytes.
"""

from __future__ import annotations

import errno
import socket
import struct
from types import MappingProxyType, TracebackType
from typing import Any

from koordlet.system.netqos import (
    DEFAULT_MINOR,
    ETH_P_ALL,
    INGRESS_QDISC,
    QDISC,
    REDIRECT_PRIO,
    FilterState,
    HTBClass,
    LinkState,
    NetQoSState,
    ip_from_keys,
)
from koordlet.system.tcplan import Op

TC_H_ROOT = 0xFFFFFFFF
IFF_UP = 0x1
MTU_BURST = 1600
_SEL_HEADER = struct.Struct("=BBBxHHhhI")
_KEY = struct.Struct(">II")
_KEY_OFF = struct.Struct("=ii")


def u32_keys(sel: Any) -> list[tuple[int, int, int]]:
    """``(mask, value, offset)`` of each key of a ``TCA_U32_SEL`` attribute, from its raw bytes."""
    raw = bytes(sel.data[sel.offset + 4 : sel.offset + sel.length])
    return parse_u32_sel(raw)


def parse_u32_sel(raw: bytes) -> list[tuple[int, int, int]]:
    """``struct tc_u32_sel`` (16 bytes) followed by ``nkeys`` ``struct tc_u32_key`` (mask and value in
    network order, offset and offmask in host order)."""
    if len(raw) < _SEL_HEADER.size:
        return []
    nkeys = _SEL_HEADER.unpack_from(raw)[2]
    out = []
    for i in range(nkeys):
        at = _SEL_HEADER.size + 16 * i
        if at + 16 > len(raw):
            break
        mask, value = _KEY.unpack_from(raw, at)
        off, _ = _KEY_OFF.unpack_from(raw, at + 8)
        out.append((mask, value, off))
    return out


def _burst(rate_bytes: int) -> int:
    # what tc computes: a millisecond of traffic plus one MTU (pyroute2 would leave 1600 bytes, which
    # caps HTB well below fast rates)
    return rate_bytes // 1000 + MTU_BURST


class NetlinkTC:
    """An rtnetlink socket in network namespace ``netns`` (``""``: the agent's own); a context manager."""

    def __init__(self, netns: str = "") -> None:
        from pyroute2 import IPRoute  # lazy: see the module docstring

        self.netns = netns
        self._ipr: Any = IPRoute(netns=netns) if netns else IPRoute()

    def close(self) -> None:
        self._ipr.close()

    def __enter__(self) -> NetlinkTC:
        return self

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    # -- read ---------------------------------------------------------------------------------------

    def link(self, name: str) -> tuple[int, bool] | None:
        """``(ifindex, up)`` of device ``name``, or ``None``."""
        found = self._ipr.link_lookup(ifname=name)
        if not found:
            return None
        msg = self._ipr.get_links(found[0])[0]
        return int(found[0]), bool(msg["flags"] & IFF_UP)

    def read(self, uplink: str, ifb: str) -> NetQoSState:
        """The tc state of ``uplink`` and of the IFB device (``None`` for a device that is not there)."""
        found, ifb_found = self.link(uplink), self.link(ifb)
        return NetQoSState(
            None if found is None else self._link_state(uplink, *found),
            None if ifb_found is None else self._link_state(ifb, *ifb_found),
        )

    def _link_state(self, name: str, index: int, up: bool) -> LinkState:
        root_kind, root_handle, root_default, ingress = "", 0, None, False
        for q in self._ipr.get_qdiscs(index=index):
            if q["index"] != index:
                continue
            kind = q.get_attr("TCA_KIND")
            if q["parent"] == TC_H_ROOT:
                root_kind, root_handle = kind, q["handle"]
                opts = q.get_attr("TCA_OPTIONS")
                init = opts.get_attr("TCA_HTB_INIT") if kind == "htb" and opts is not None else None
                root_default = init["defcls"] if init is not None else None
            elif kind == "ingress":
                ingress = True
        ours = root_kind == "htb" and root_handle == QDISC
        classes = self._classes(index) if ours else {}
        filters = self._filters(index, QDISC) if ours else ()
        ingress_filters = self._filters(index, INGRESS_QDISC) if ingress else ()
        return LinkState(
            name,
            index,
            up,
            root_kind,
            root_handle,
            root_default,
            ingress,
            MappingProxyType(classes),
            filters,
            ingress_filters,
        )

    def _classes(self, index: int) -> dict[int, HTBClass]:
        out: dict[int, HTBClass] = {}
        for c in self._ipr.get_classes(index=index):
            if c["index"] != index or c.get_attr("TCA_KIND") != "htb" or c["handle"] >> 16 != QDISC >> 16:
                continue
            opts = c.get_attr("TCA_OPTIONS")
            parms = opts.get_attr("TCA_HTB_PARMS")
            # TCA_HTB_PARMS holds 32-bit bytes/s; faster rates come in the 64-bit attributes
            rate = opts.get_attr("TCA_HTB_RATE64") or parms["rate"]
            ceil = opts.get_attr("TCA_HTB_CEIL64") or parms["ceil"]
            # a class right under the qdisc is listed with parent TC_H_ROOT; the model says 1:
            parent = QDISC if c["parent"] == TC_H_ROOT else c["parent"]
            out[c["handle"]] = HTBClass(c["handle"], parent, rate, ceil, parms["prio"])
        return out

    def _filters(self, index: int, parent: int) -> tuple[FilterState, ...]:
        out = []
        for f in self._ipr.get_filters(index=index, parent=parent):
            handle = f["handle"]
            if f.get_attr("TCA_KIND") != "u32" or handle & 0xFFF == 0:
                continue  # hash tables and their roots, not key nodes
            prio, protocol = f["info"] >> 16, socket.ntohs(f["info"] & 0xFFFF)
            opts = f.get_attr("TCA_OPTIONS")
            if opts is None:
                continue
            sel = opts.get_attr("TCA_U32_SEL")
            matched = ip_from_keys(protocol, u32_keys(sel)) if sel is not None else None
            out.append(
                FilterState(
                    handle,
                    prio,
                    protocol,
                    opts.get_attr("TCA_U32_CLASSID"),
                    matched[0] if matched else None,
                    matched[1] if matched else None,
                    _redirect_target(opts),
                )
            )
        return tuple(out)

    # -- write --------------------------------------------------------------------------------------

    def execute(self, op: Op) -> None:
        """Carry out one step; ``OSError`` (the kernel's errno, and the step) when it is refused."""
        from pyroute2.netlink.exceptions import NetlinkError

        try:
            self._one(op)
        except NetlinkError as err:
            raise OSError(err.code, f"{op.describe()}: {errno.errorcode.get(err.code, err.code)}") from err
        except OSError as err:
            raise OSError(err.errno or errno.EIO, f"{op.describe()}: {err}") from err

    def _index(self, name: str) -> int:
        found = self.link(name)
        if found is None:
            raise OSError(errno.ENODEV, f"no network interface {name!r}")
        return found[0]

    def _one(self, op: Op) -> None:
        ipr = self._ipr
        if op.kind == "create-ifb":
            ipr.link("add", ifname=op.dev, kind="ifb")
            ipr.link("set", index=self._index(op.dev), state="up")
            return
        index = self._index(op.dev)
        if op.kind == "up-ifb":
            ipr.link("set", index=index, state="up")
        elif op.kind == "delete-ifb":
            ipr.link("del", index=index)
        elif op.kind == "replace-root":
            ipr.tc("replace", "htb", index, QDISC, default=DEFAULT_MINOR)
        elif op.kind == "delete-root":
            ipr.tc("del", index=index, handle=QDISC, parent=TC_H_ROOT)
        elif op.kind in ("add-class", "change-class"):
            c = op.cls
            assert c is not None
            ipr.tc(
                op.kind,
                "htb",
                index,
                c.handle,
                parent=c.parent,
                rate=c.rate,
                ceil=c.ceil,
                prio=c.prio,
                burst=_burst(c.rate),
                cburst=_burst(c.ceil),
            )
        elif op.kind == "del-class":
            ipr.tc("del-class", index=index, handle=op.handle, parent=QDISC)
        elif op.kind in ("add-filter", "replace-filter"):
            f = op.flt
            assert f is not None
            extra = {"handle": op.handle} if op.kind == "replace-filter" else {}
            ipr.tc(
                op.kind,
                "u32",
                index,
                parent=QDISC,
                prio=op.prio,
                protocol=f.protocol,
                target=f.classid,
                keys=f.selector_keys(),
                **extra,
            )
        elif op.kind == "del-filter":
            ipr.tc(
                "del-filter",
                "u32",
                index,
                parent=QDISC,
                prio=op.prio,
                protocol=op.protocol,
                handle=op.handle,
                target=0,
            )
        elif op.kind == "add-ingress":
            ipr.tc("add", "ingress", index, INGRESS_QDISC)
        elif op.kind == "delete-ingress":
            ipr.tc("del", "ingress", index, INGRESS_QDISC)
        elif op.kind == "add-redirect":
            ipr.tc(
                "add-filter",
                "u32",
                index,
                parent=INGRESS_QDISC,
                prio=REDIRECT_PRIO,
                protocol=ETH_P_ALL,
                target=0x1,
                keys=["0x0/0x0+0"],
                action={
                    "kind": "mirred",
                    "direction": "egress",
                    "action": "redirect",
                    "ifindex": self._index(op.target),
                },
            )
        elif op.kind == "del-redirect":
            ipr.tc(
                "del-filter",
                "u32",
                index,
                parent=INGRESS_QDISC,
                prio=REDIRECT_PRIO,
                protocol=ETH_P_ALL,
                target=0,
            )
        else:  # pragma: no cover - OpKind is closed
            raise OSError(errno.EINVAL, f"unknown tc step {op.kind}")


def _redirect_target(opts: Any) -> int | None:
    acts = opts.get_attr("TCA_U32_ACT")
    if acts is None:
        return None
    for _, act in acts["attrs"]:
        if not hasattr(act, "get_attr") or act.get_attr("TCA_ACT_KIND") != "mirred":
            continue
        parms = act.get_attr("TCA_ACT_OPTIONS").get_attr("TCA_MIRRED_PARMS")
        if parms is not None:
            return int(parms["ifindex"])
    return None
