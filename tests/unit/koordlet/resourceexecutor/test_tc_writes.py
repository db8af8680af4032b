"""The executor's tc write kind on a kernel-like fake: validation before netlink, apply by difference,
cache and repair, per-step audit, dry run, classified refusals, removal."""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
from pathlib import Path

from prometheus_client import CollectorRegistry

from koordlet.api.netqos import ClassLimit, DirectionSpec, NetQoSSpec
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.resourceexecutor.tcwrites import TCBackend
from koordlet.system.cgroups import CgroupMode
from koordlet.system.netqos import BE_CLASS
from koordlet.system.paths import HostPaths
from koordlet.testing import FakeClock
from tests.unit.koordlet.system.faketc import FakeKernel

M = 1_000_000
SPEC = NetQoSSpec(
    "eth0",
    egress=DirectionSpec(1000 * M, ClassLimit(100 * M, 600 * M), ClassLimit(20 * M, 200 * M)),
    ingress=DirectionSpec(1000 * M, ClassLimit(100 * M, 600 * M), ClassLimit(20 * M, 100 * M)),
    ls_ips=frozenset({ipaddress.ip_address("10.1.0.2")}),
    be_ips=frozenset({ipaddress.ip_address("10.1.0.3")}),
)


class Opener:
    """A backend factory over one fake kernel, counting how often netlink was opened."""

    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel
        self.opened: list[str] = []

    def __call__(self, netns: str) -> TCBackend:
        self.opened.append(netns)
        return self.kernel


def make(
    tmp_path: Path, clock: FakeClock, kernel: FakeKernel, **config: object
) -> tuple[ResourceExecutor, Opener]:
    ex = ResourceExecutor(
        HostPaths(cgroup_root=tmp_path),
        config=ExecutorConfig(netns="test-ns", **config),  # type: ignore[arg-type]
        clock=clock,
        wall_clock=clock.wall,
        registry=CollectorRegistry(),
        mode=CgroupMode.V1,
        online_cpus=lambda: None,
    )
    opener = Opener(kernel)
    ex.tc._backend = opener
    return ex, opener


def test_invalid_specs_never_reach_netlink(tmp_path: Path, fake_clock: FakeClock) -> None:
    ex, opener = make(tmp_path, fake_clock, FakeKernel("eth0"))
    bad = dataclasses.replace(SPEC, be_ips=SPEC.ls_ips)
    res = ex.tc.apply(bad, owner="TCNetworkQoS")
    assert not res.written and "refused before touching the kernel" in res.error
    assert opener.opened == []


def test_apply_audits_each_step_then_caches_then_repairs(tmp_path: Path, fake_clock: FakeClock) -> None:
    kernel = FakeKernel("eth0")
    ex, opener = make(tmp_path, fake_clock, kernel)
    res = ex.tc.apply(SPEC, owner="TCNetworkQoS", reason="nodeslo")
    assert res.written and res.update.cgroup_dir == "eth0" and "BE 20000000/200000000" in res.update.value
    assert opener.opened == ["test-ns"] and kernel.closed == 1
    events = ex.events()
    assert len(events) == len(kernel.executed) > 10
    assert {e["resource"] for e in events} == {"tc"} and events[0]["owner"] == "TCNetworkQoS"
    # unchanged spec within the force period: no netlink at all
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS").skipped == "unchanged"
    assert len(opener.opened) == 1
    # someone changes BE's ceil behind our back: repaired after the force period, one step
    dev = kernel.devs["eth0"]
    dev.classes[BE_CLASS] = dataclasses.replace(dev.classes[BE_CLASS], ceil=1)
    assert ex.reconcile_owned() == []
    fake_clock.advance(61)
    before = len(kernel.executed)
    assert [r.written for r in ex.reconcile_owned()] == [True]
    assert [o.kind for o in kernel.executed[before:]] == ["change-class"]
    fake_clock.advance(61)
    assert [r.skipped for r in ex.reconcile_owned()] == ["unchanged"]
    ex.release("TCNetworkQoS")
    fake_clock.advance(61)
    assert ex.reconcile_owned() == []


def test_a_refused_step_stops_the_pass_and_is_classified(tmp_path: Path, fake_clock: FakeClock) -> None:
    kernel = FakeKernel("eth0")
    kernel.fail_on["add-filter"] = errno.ENOSPC
    ex, _ = make(tmp_path, fake_clock, kernel)
    res = ex.tc.apply(SPEC, owner="TCNetworkQoS")
    assert not res.written and "after 5 of" in res.error
    assert ex.metrics.errors.labels(type="tc", kind="enospc")._value.get() == 1
    assert len(ex.events()) == 5  # replace-root and four classes were done and are audited
    kernel.fail_on.clear()
    # not cached after a failure: the next pass finishes the job from what is there
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS").written
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS", force=True).skipped == "unchanged"


def test_dry_run_plans_but_changes_nothing(tmp_path: Path, fake_clock: FakeClock) -> None:
    kernel = FakeKernel("eth0")
    ex, _ = make(tmp_path, fake_clock, kernel, dry_run=True)
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS").skipped == "dry-run"
    assert kernel.executed == [] and ex.events() == []


def test_missing_uplink_and_missing_pyroute2(tmp_path: Path, fake_clock: FakeClock) -> None:
    ex, _ = make(tmp_path, fake_clock, FakeKernel("eth1"))
    res = ex.tc.apply(SPEC, owner="TCNetworkQoS")
    assert "no network interface 'eth0'" in res.error

    def no_pyroute2(netns: str) -> TCBackend:
        raise ImportError("No module named 'pyroute2'")

    ex.tc._backend = no_pyroute2
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS").skipped == "unsupported"


def test_remove_deletes_everything_ours_and_forgets_the_spec(tmp_path: Path, fake_clock: FakeClock) -> None:
    kernel = FakeKernel("eth0")
    ex, _ = make(tmp_path, fake_clock, kernel)
    assert ex.tc.apply(SPEC, owner="TCNetworkQoS").written
    res = ex.tc.remove("eth0", owner="TCNetworkQoS", reason="gate off")
    assert res.written
    state = ex.tc.state("eth0")
    assert state.ifb is None and state.uplink is not None and not state.uplink.has_our_root
    assert ex.tc.remove("eth0", owner="TCNetworkQoS").skipped == "unchanged"
    fake_clock.advance(61)
    assert ex.reconcile_owned() == []  # nothing re-applied after removal
    assert "refused" in ex.tc.remove("../eth0", owner="x").error
