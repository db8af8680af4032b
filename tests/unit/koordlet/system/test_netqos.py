"""Network QoS model and planner: classes computed by hand from a spec, u32 keys both ways, validation,
and steps that a kernel-like fake accepts in order and that leave nothing more to do."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordlet.api.netqos import ClassLimit, DirectionSpec, IPAddress, NetQoSSpec
from koordlet.system import netqos
from koordlet.system.netqos import (
    BE_CLASS,
    LS_CLASS,
    QDISC,
    ROOT_CLASS,
    SYSTEM_CLASS,
    FilterState,
    HTBClass,
    IPFilter,
)
from koordlet.system.tcnetlink import parse_u32_sel
from koordlet.system.tcplan import plan, plan_removal
from koordshared.runtime.errors import InvalidValue
from tests.unit.koordlet.system.faketc import FakeKernel

M = 1_000_000
IP = ipaddress.ip_address


def spec(**kw: object) -> NetQoSSpec:
    base = NetQoSSpec(
        "eth0",
        egress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, 40 * M)),
        ls_ips=frozenset({IP("10.0.0.5"), IP("fd00::5")}),
        be_ips=frozenset({IP("10.0.0.9")}),
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def converge(kernel: FakeKernel, s: NetQoSSpec) -> list[str]:
    """Plan, carry out, and return the steps' descriptions; a second plan must be empty."""
    ops = plan(s, kernel.read(s.uplink, s.ifb_name))
    for op in ops:
        kernel.execute(op)
    assert plan(s, kernel.read(s.uplink, s.ifb_name)) == []
    return [op.describe() for op in ops]


def test_classes_follow_the_spec_by_hand() -> None:
    tree = netqos.build_tree(spec().egress, [IP("10.0.0.5")], [IP("10.0.0.9")], "src")
    # bytes per second: 400 Mbit = 50e6 B/s; system is guaranteed 400 - 50 - 10 = 340 Mbit
    assert tree.classes == (
        HTBClass(ROOT_CLASS, QDISC, 50_000_000, 50_000_000, 0),
        HTBClass(SYSTEM_CLASS, ROOT_CLASS, 42_500_000, 50_000_000, 1),
        HTBClass(LS_CLASS, ROOT_CLASS, 6_250_000, 18_750_000, 2),
        HTBClass(BE_CLASS, ROOT_CLASS, 1_250_000, 5_000_000, 3),
    )
    assert tree.filters == {
        IPFilter(IP("10.0.0.5"), LS_CLASS, "src"),
        IPFilter(IP("10.0.0.9"), BE_CLASS, "src"),
    }


def test_u32_keys_both_ways() -> None:
    assert IPFilter(IP("192.0.2.1"), LS_CLASS, "src").selector_keys() == ["0xc0000201/0xffffffff+12"]
    assert IPFilter(IP("192.0.2.1"), LS_CLASS, "dst").selector_keys() == ["0xc0000201/0xffffffff+16"]
    assert IPFilter(IP("2001:db8::1"), LS_CLASS, "dst").selector_keys() == [
        "0x20010db8/0xffffffff+24",
        "0x00000000/0xffffffff+28",
        "0x00000000/0xffffffff+32",
        "0x00000001/0xffffffff+36",
    ]
    # a TCA_U32_SEL as this kernel returned it for `match ip src 192.0.2.1` (after the attribute header)
    raw = bytes.fromhex("01000100000000000000000000000000ffffffffc00002010c00000000000000")
    assert parse_u32_sel(raw) == [(0xFFFFFFFF, 0xC0000201, 12)]
    assert netqos.ip_from_keys(netqos.ETH_P_IP, parse_u32_sel(raw)) == (IP("192.0.2.1"), "src")
    assert netqos.ip_from_keys(netqos.ETH_P_IP, [(0xFFFFFF00, 0xC0000200, 12)]) is None  # a /24: not ours
    assert netqos.ip_from_keys(netqos.ETH_P_ALL, [(0, 0, 0)]) is None


@given(
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)),
    st.sampled_from(["src", "dst"]),
)
def test_keys_read_back_as_the_address(ip: IPAddress, match: netqos.Match) -> None:
    f = IPFilter(ip, BE_CLASS, match)
    keys = []
    for k in f.selector_keys():
        value, rest = k.split("/")
        mask, off = rest.split("+")
        keys.append((int(mask, 16), int(value, 16), int(off)))
    assert netqos.ip_from_keys(f.protocol, keys) == (ip, match)


@pytest.mark.parametrize(
    "bad",
    [
        {"uplink": "eth0/../x"},
        {"uplink": "a" * 16},
        {"ifb": "eth0"},
        {"egress": DirectionSpec(400 * M, ClassLimit(60 * M, 50 * M), ClassLimit(10 * M, 40 * M))},
        {"egress": DirectionSpec(400 * M, ClassLimit(50 * M, 500 * M), ClassLimit(10 * M, 40 * M))},
        {"egress": DirectionSpec(100 * M, ClassLimit(90 * M, 100 * M), ClassLimit(20 * M, 40 * M))},
        {"egress": DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(0, 40 * M))},
        {"ingress": DirectionSpec(1000, ClassLimit(500, 1000), ClassLimit(500, 1000))},
        {"be_ips": frozenset({IP("10.0.0.5")})},
    ],
)
def test_specs_the_kernel_would_refuse_or_misapply_are_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidValue):
        spec(**bad).validate()


def test_first_apply_builds_everything_in_an_order_the_kernel_takes() -> None:
    kernel = FakeKernel("eth0")
    steps = converge(kernel, spec())
    assert steps[0] == "dev eth0: replace-root htb handle 1: default 2"
    assert [s.split(" class ")[1].split()[0] for s in steps[1:5]] == ["1:1", "1:2", "1:3", "1:4"]
    assert steps[5:] == [
        "dev eth0: add-filter filter u32 match ip src 10.0.0.5 flowid 1:3",
        "dev eth0: add-filter filter u32 match ip src 10.0.0.9 flowid 1:4",
        "dev eth0: add-filter filter u32 match ip src fd00::5 flowid 1:3",
    ]
    prios = {f.ip: f.prio for f in kernel.devs["eth0"].filters}
    assert prios == {IP("10.0.0.5"): 10, IP("10.0.0.9"): 10, IP("fd00::5"): 11}


def test_a_change_touches_only_what_differs() -> None:
    kernel = FakeKernel("eth0")
    converge(kernel, spec())
    s2 = spec(
        egress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, 20 * M)),
        ls_ips=frozenset({IP("10.0.0.5"), IP("10.0.0.9")}),  # 10.0.0.9 moved from BE to LS
        be_ips=frozenset({IP("10.0.0.7")}),
    )
    handle = next(f.handle for f in kernel.devs["eth0"].filters if f.ip == IP("10.0.0.9"))
    assert converge(kernel, s2) == [
        "dev eth0: del-filter prio 11 handle 80000802",
        "dev eth0: change-class class 1:4 parent 1:1 rate 10000000bit ceil 20000000bit prio 3",
        "dev eth0: add-filter filter u32 match ip src 10.0.0.7 flowid 1:4",
        f"dev eth0: replace-filter handle {handle:x} filter u32 match ip src 10.0.0.9 flowid 1:3",
    ]


def test_strays_and_duplicates_go_filters_before_classes() -> None:
    kernel = FakeKernel("eth0")
    converge(kernel, spec())
    dev = kernel.devs["eth0"]
    dev.classes[0x10005] = HTBClass(0x10005, ROOT_CLASS, 1000, 1000, 4)
    dev.classes[0x10006] = HTBClass(0x10006, ROOT_CLASS, 1000, 1000, 4)
    dev.filters.append(FilterState(0x80000900, 10, netqos.ETH_P_IP, 0x10005, IP("10.0.0.77"), "src"))
    dev.filters.append(FilterState(0x80000901, 10, netqos.ETH_P_IP, LS_CLASS, IP("10.0.0.5"), "src"))
    dev.filters.append(FilterState(0x80000A00, 30, netqos.ETH_P_IP, 0x10006, None, None))  # not ours
    assert converge(kernel, spec()) == [
        "dev eth0: del-filter prio 10 handle 80000900",
        "dev eth0: del-filter prio 10 handle 80000901",
        "dev eth0: del-class 1:5",
    ]
    # 1:6 stays: a filter that is not ours still sends traffic to it
    assert 0x10006 in dev.classes and len(dev.filters) == 4


def test_a_foreign_root_is_replaced_and_our_root_with_another_default_remade() -> None:
    kernel = FakeKernel("eth0")
    kernel.devs["eth0"].root = ("fq", 0x80010000, None)
    assert converge(kernel, spec())[0] == "dev eth0: replace-root htb handle 1: default 2"
    kernel.devs["eth0"].root = ("htb", QDISC, 0x10)
    assert converge(kernel, spec())[:2] == [
        "dev eth0: delete-root",
        "dev eth0: replace-root htb handle 1: default 2",
    ]


def test_ingress_goes_through_an_ifb_made_before_the_redirect() -> None:
    kernel = FakeKernel("eth0")
    s = spec(ingress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, 30 * M)))
    steps = converge(kernel, s)
    ifb = s.ifb_name
    assert ifb == "kifb-eth0"
    first_ifb = steps.index(f"dev {ifb}: create-ifb")
    assert steps.index("dev eth0: add-ingress") > max(
        i for i, x in enumerate(steps) if x.startswith(f"dev {ifb}")
    )
    assert steps[-1] == f"dev eth0: add-redirect ingress -> mirred egress redirect dev {ifb}"
    assert first_ifb > 0
    assert {f.match for f in kernel.devs[ifb].filters} == {"dst"}
    # a redirect to another device is put right
    kernel.devs["eth0"].ingress_filters[0] = dataclasses.replace(
        kernel.devs["eth0"].ingress_filters[0], redirect_ifindex=99
    )
    assert converge(kernel, s) == [
        "dev eth0: del-redirect",
        f"dev eth0: add-redirect ingress -> mirred egress redirect dev {ifb}",
    ]
    # a down IFB is brought up
    kernel.devs[ifb].up = False
    assert converge(kernel, s) == [f"dev {ifb}: up-ifb"]
    # ingress no longer wanted: the redirect stops, then the device goes
    assert converge(kernel, spec()) == ["dev eth0: delete-ingress", f"dev {ifb}: delete-ifb"]


def test_removal_leaves_nothing_of_ours() -> None:
    kernel = FakeKernel("eth0")
    s = spec(ingress=DirectionSpec(400 * M, ClassLimit(50 * M, 150 * M), ClassLimit(10 * M, 30 * M)))
    converge(kernel, s)
    ops = plan_removal(kernel.read("eth0", s.ifb_name), s.ifb_name)
    assert [o.kind for o in ops] == ["delete-ingress", "delete-ifb", "delete-root"]
    for op in ops:
        kernel.execute(op)
    state = kernel.read("eth0", s.ifb_name)
    assert state.ifb is None and state.uplink is not None
    assert not state.uplink.has_our_root and not state.uplink.classes and not state.uplink.filters
    assert plan_removal(state, s.ifb_name) == []
    assert plan_removal(kernel.read("gone0", "kifb-gone0"), "kifb-gone0") == []


def test_plan_needs_the_uplink() -> None:
    with pytest.raises(ValueError, match="no network interface"):
        plan(spec(), FakeKernel().read("eth0", "kifb-eth0"))


rates = st.integers(8000, 10_000 * M)


@st.composite
def direction(draw: st.DrawFn) -> DirectionSpec:
    total = draw(rates)
    ls_rate = draw(st.integers(8000, max(8000, total // 2)))
    be_rate = draw(st.integers(8000, max(8000, total - ls_rate)))
    ls_ceil = draw(st.integers(ls_rate, total))
    be_ceil = draw(st.integers(be_rate, total))
    return DirectionSpec(total, ClassLimit(ls_rate, ls_ceil), ClassLimit(be_rate, be_ceil))


@settings(max_examples=60, deadline=None)
@given(
    first=direction(),
    second=direction(),
    ips=st.lists(st.ip_addresses(v=4), min_size=0, max_size=6, unique=True),
    split=st.integers(0, 6),
    with_ingress=st.booleans(),
)
def test_any_valid_spec_converges_from_any_previous_one(
    first: DirectionSpec, second: DirectionSpec, ips: list[IPAddress], split: int, with_ingress: bool
) -> None:
    s1 = spec(
        egress=first,
        ingress=second if with_ingress else None,
        ls_ips=frozenset(ips[:split]),
        be_ips=frozenset(ips[split:]),
    )
    s2 = spec(egress=second, ingress=first, ls_ips=frozenset(ips[split:]), be_ips=frozenset(ips[:split]))
    for s in (s1, s2):
        try:
            s.validate()
        except InvalidValue:
            return  # e.g. LS + BE rates above the link: refused before anything is planned
    kernel = FakeKernel("eth0")
    converge(kernel, s1)
    converge(kernel, s2)
    for dev in kernel.devs.values():
        by = dev.classes
        # what reaches the kernel: 1 <= rate <= ceil <= the link's ceil, and children under the root
        for c in by.values():
            assert 1 <= c.rate <= c.ceil <= by[ROOT_CLASS].ceil
            assert c.parent in (QDISC, ROOT_CLASS)
