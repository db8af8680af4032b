"""A fake kernel for tc planning tests: carries out ``tcplan.Op`` steps on in-memory devices with the
kernel's refusals that matter to ordering (a class in use by a filter or with children is busy, objects
that exist cannot be added again, missing ones cannot be changed), and reads back a ``NetQoSState``."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from types import MappingProxyType

from koordlet.system.netqos import (
    DEFAULT_MINOR,
    QDISC,
    REDIRECT_PRIO,
    FilterState,
    HTBClass,
    LinkState,
    NetQoSState,
)
from koordlet.system.tcplan import Op


@dataclass
class FakeDev:
    index: int
    up: bool = True
    root: tuple[str, int, int | None] = ("noqueue", 0, None)
    classes: dict[int, HTBClass] = field(default_factory=dict)
    filters: list[FilterState] = field(default_factory=list)
    ingress: bool = False
    ingress_filters: list[FilterState] = field(default_factory=list)
    next_handle: int = 0x80000800


class FakeKernel:
    """Also a ``TCBackend``: ``read``/``execute``/``close``."""

    def __init__(self, *uplinks: str) -> None:
        self.devs: dict[str, FakeDev] = {}
        self._next_index = 2
        for name in uplinks:
            self.add_dev(name)
        self.executed: list[Op] = []
        self.fail_on: dict[str, int] = {}
        """Op kind -> errno to refuse it with."""
        self.closed = 0

    def add_dev(self, name: str) -> FakeDev:
        dev = FakeDev(self._next_index)
        self._next_index += 1
        self.devs[name] = dev
        return dev

    def close(self) -> None:
        self.closed += 1

    def read(self, uplink: str, ifb: str) -> NetQoSState:
        return NetQoSState(self._state(uplink), self._state(ifb))

    def _state(self, name: str) -> LinkState | None:
        d = self.devs.get(name)
        if d is None:
            return None
        return LinkState(
            name,
            d.index,
            d.up,
            d.root[0],
            d.root[1],
            d.root[2],
            d.ingress,
            MappingProxyType(dict(d.classes)),
            tuple(d.filters),
            tuple(d.ingress_filters),
        )

    def execute(self, op: Op) -> None:
        if op.kind in self.fail_on:
            raise OSError(self.fail_on[op.kind], f"{op.describe()}: refused")
        self._do(op)
        self.executed.append(op)

    def _dev(self, name: str) -> FakeDev:
        if name not in self.devs:
            raise OSError(errno.ENODEV, name)
        return self.devs[name]

    def _do(self, op: Op) -> None:
        if op.kind == "create-ifb":
            if op.dev in self.devs:
                raise OSError(errno.EEXIST, op.dev)
            self.add_dev(op.dev)
            return
        d = self._dev(op.dev)
        if op.kind == "up-ifb":
            d.up = True
        elif op.kind == "delete-ifb":
            del self.devs[op.dev]
        elif op.kind == "replace-root":
            if d.root[0] == "htb" and d.root[1] == QDISC:
                raise OSError(errno.EOPNOTSUPP, "htb cannot change in place")
            d.root, d.classes, d.filters = ("htb", QDISC, DEFAULT_MINOR), {}, []
        elif op.kind == "delete-root":
            d.root, d.classes, d.filters = ("noqueue", 0, None), {}, []
        elif op.kind in ("add-class", "change-class"):
            assert op.cls is not None
            exists = op.cls.handle in d.classes
            if exists == (op.kind == "add-class"):
                raise OSError(errno.EEXIST if exists else errno.ENOENT, op.describe())
            if op.cls.parent != QDISC and op.cls.parent not in d.classes:
                raise OSError(errno.ENOENT, "no parent class")
            d.classes[op.cls.handle] = op.cls
        elif op.kind == "del-class":
            busy = any(f.classid == op.handle for f in d.filters) or any(
                c.parent == op.handle for c in d.classes.values()
            )
            if busy:
                raise OSError(errno.EBUSY, op.describe())
            del d.classes[op.handle]
        elif op.kind == "add-filter":
            assert op.flt is not None
            d.filters.append(
                FilterState(d.next_handle, op.prio, op.protocol, op.flt.classid, op.flt.ip, op.flt.match)
            )
            d.next_handle += 1
        elif op.kind == "replace-filter":
            assert op.flt is not None
            at = [i for i, f in enumerate(d.filters) if f.handle == op.handle]
            if not at:
                raise OSError(errno.ENOENT, op.describe())
            old = d.filters[at[0]]
            d.filters[at[0]] = FilterState(
                old.handle, old.prio, old.protocol, op.flt.classid, op.flt.ip, op.flt.match
            )
        elif op.kind == "del-filter":
            d.filters = [f for f in d.filters if f.handle != op.handle]
        elif op.kind == "add-ingress":
            if d.ingress:
                raise OSError(errno.EEXIST, op.describe())
            d.ingress = True
        elif op.kind == "delete-ingress":
            d.ingress, d.ingress_filters = False, []
        elif op.kind == "add-redirect":
            if not d.ingress:
                raise OSError(errno.EINVAL, "no ingress qdisc")
            target = self._dev(op.target)
            d.ingress_filters.append(FilterState(0x80000800, REDIRECT_PRIO, 3, 1, None, None, target.index))
        elif op.kind == "del-redirect":
            d.ingress_filters = [f for f in d.ingress_filters if f.prio != REDIRECT_PRIO]
        else:
            raise AssertionError(op.kind)
