"""Kernel tunables through the executor on a fake /proc and /sys: validation, unchanged skips, optional
files, flag lists (sched_features), read-back, dry run, re-apply, and restore of the original values."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from koordlet.api.errors import ResourceUnsupported
from koordlet.resourceexecutor.config import ExecutorConfig
from koordlet.resourceexecutor.executor import ResourceExecutor
from koordlet.system import native, sysctl
from koordlet.system.cgroups import CgroupMode
from koordlet.system.paths import HostPaths
from koordlet.testing import FakeClock
from koordshared.runtime.errors import InvalidValue

FEATURES = "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY\n"


@pytest.fixture
def host(tmp_path: Path) -> HostPaths:
    paths = HostPaths(cgroup_root=tmp_path / "cgroup", proc_root=tmp_path / "proc", sys_root=tmp_path / "sys")
    for rel, value in (
        ("sys/vm/min_free_kbytes", "67584\n"),
        ("sys/vm/watermark_scale_factor", "10\n"),
    ):
        (paths.proc_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (paths.proc_root / rel).write_text(value)
    return paths


def _executor(
    paths: HostPaths, clock: FakeClock, writes: list[tuple[str, str]], **config: object
) -> ResourceExecutor:
    def writer(items: object) -> list[int]:
        out = []
        for p, v in items:  # type: ignore[attr-defined]
            text = v.decode() if isinstance(v, bytes) else v
            err = native.write_batch([(p, text)])[0]
            if not err:
                writes.append((str(p), text))
            out.append(err)
        return out

    return ResourceExecutor(
        paths,
        config=ExecutorConfig(**config),  # type: ignore[arg-type]
        clock=clock,
        wall_clock=clock.wall,
        registry=CollectorRegistry(),
        mode=CgroupMode.V1,
        online_cpus=lambda: None,
        writer=writer,
    )


def test_write_skip_and_restore_the_original(host: HostPaths, fake_clock: FakeClock) -> None:
    writes: list[tuple[str, str]] = []
    ex = _executor(host, fake_clock, writes)
    res = ex.sysctl.update("min_free_kbytes", "102400", owner="SystemConfig", reason="factor 100")
    assert res.written and not res.error
    assert sysctl.read(host, "min_free_kbytes") == "102400"
    assert ex.sysctl.update("min_free_kbytes", "102400", owner="SystemConfig").skipped == "unchanged"
    assert ex.sysctl.update("watermark_scale_factor", "10", owner="SystemConfig").skipped == "unchanged"
    assert ex.sysctl.update("watermark_scale_factor", "150", owner="SystemConfig").written
    # a second change keeps the first original
    assert ex.sysctl.update("min_free_kbytes", "204800", owner="SystemConfig").written
    event = ex.events()[0]
    assert (event["resource"], event["before"], event["after"]) == ("min_free_kbytes", "67584", "102400")

    results = ex.sysctl.restore("SystemConfig")
    assert all(r.ok for r in results)
    assert sysctl.read(host, "min_free_kbytes") == "67584"
    assert sysctl.read(host, "watermark_scale_factor") == "10"
    assert ex.sysctl.restore("SystemConfig") == []  # nothing owned any more


def test_restore_writes_an_original_outside_the_policy_range(host: HostPaths, fake_clock: FakeClock) -> None:
    (host.proc_root / "sys/vm/min_free_kbytes").write_text("4096\n")  # below Koordinator's 10240
    ex = _executor(host, fake_clock, [])
    assert ex.sysctl.update("min_free_kbytes", "20480", owner="s").written
    assert [r.ok for r in ex.sysctl.restore("s")] == [True]
    assert sysctl.read(host, "min_free_kbytes") == "4096"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("min_free_kbytes", "10239"),
        ("min_free_kbytes", "10485761"),
        ("watermark_scale_factor", "9"),
        ("watermark_scale_factor", "401"),
        ("memcg_reap_background", "2"),
        ("min_free_kbytes", "1e6"),
        ("sched_features", "no_next_buddy"),
        ("sched_features", "A B"),
    ],
)
def test_out_of_range_values_are_refused_before_any_io(
    host: HostPaths, fake_clock: FakeClock, name: str, value: str
) -> None:
    writes: list[tuple[str, str]] = []
    ex = _executor(host, fake_clock, writes)
    res = ex.sysctl.update(name, value, owner="s")
    assert not res.written and "refused before writing" in res.error
    assert writes == []


def test_optional_files_are_unsupported_where_missing(host: HostPaths, fake_clock: FakeClock) -> None:
    ex = _executor(host, fake_clock, [])
    assert ex.sysctl.update("memcg_reap_background", "1", owner="s").skipped == "unsupported"
    assert ex.sysctl.update("no_such_knob", "1", owner="s").skipped == "unsupported"
    reap = host.sys_root / "kernel/mm/memcg_reaper/reap_background"
    reap.parent.mkdir(parents=True)
    reap.write_text("0\n")
    assert ex.sysctl.update("memcg_reap_background", "1", owner="s").written


def test_sched_features_sets_one_flag_and_restores_it(host: HostPaths, fake_clock: FakeClock) -> None:
    path = host.sys_root / "kernel/debug/sched_features"
    path.parent.mkdir(parents=True)
    path.write_text(FEATURES)

    def kernel_like(items: object) -> list[int]:
        # the kernel flips one flag in its listing; a plain file would be overwritten instead
        for _, v in items:  # type: ignore[attr-defined]
            name = sysctl.flag_name(v)
            path.write_text(
                " ".join(v if sysctl.flag_name(t) == name else t for t in path.read_text().split())
            )
        return [0]

    ex = _executor(host, fake_clock, [])
    ex.sysctl._writer = kernel_like
    assert ex.sysctl.update("sched_features", "NO_NEXT_BUDDY", owner="s").skipped == "unchanged"
    assert ex.sysctl.update("sched_features", "NEXT_BUDDY", owner="s").written
    assert ex.sysctl.update("sched_features", "NO_LAST_BUDDY", owner="s").written
    assert "NEXT_BUDDY" in path.read_text().split()
    restored = ex.sysctl.restore("s")
    assert sorted(r.update.value for r in restored if r.written) == ["LAST_BUDDY", "NO_NEXT_BUDDY"]
    assert path.read_text().split() == FEATURES.split()


def test_a_value_the_kernel_did_not_keep_is_an_error(host: HostPaths, fake_clock: FakeClock) -> None:
    ex = _executor(host, fake_clock, [])
    ex.sysctl._writer = lambda items: [0]  # the kernel took the write and kept its old value
    res = ex.sysctl.update("watermark_scale_factor", "150", owner="s")
    assert not res.written and "kept '10'" in res.error


def test_kernel_refusal_is_classified(host: HostPaths, fake_clock: FakeClock) -> None:
    ex = _executor(host, fake_clock, [])
    ex.sysctl._writer = lambda items: [errno.EINVAL]
    res = ex.sysctl.update("watermark_scale_factor", "150", owner="s")
    assert "errno 22" in res.error
    assert ex.metrics.errors.labels(type="watermark_scale_factor", kind="einval")._value.get() == 1


def test_dry_run_writes_nothing(host: HostPaths, fake_clock: FakeClock) -> None:
    writes: list[tuple[str, str]] = []
    ex = _executor(host, fake_clock, writes, dry_run=True)
    assert ex.sysctl.update("watermark_scale_factor", "150", owner="s").skipped == "dry-run"
    assert writes == [] and sysctl.read(host, "watermark_scale_factor") == "10"


def test_out_of_band_change_is_repaired_after_the_force_period(
    host: HostPaths, fake_clock: FakeClock
) -> None:
    ex = _executor(host, fake_clock, [])
    assert ex.sysctl.update("watermark_scale_factor", "150", owner="s").written
    (host.proc_root / "sys/vm/watermark_scale_factor").write_text("30\n")
    assert ex.reconcile_owned() == []
    fake_clock.advance(61)
    assert [r.written for r in ex.reconcile_owned()] == [True]
    assert sysctl.read(host, "watermark_scale_factor") == "150"
    ex.release("s")
    fake_clock.advance(61)
    assert ex.reconcile_owned() == []


def test_lookup_errors() -> None:
    with pytest.raises(ResourceUnsupported):
        sysctl.get_sysctl("vm.nope")
    with pytest.raises(InvalidValue):
        sysctl.validate("min_free_kbytes", "10240\n1")


@given(st.integers(-(1 << 40), 1 << 40))
def test_only_values_in_range_pass(value: int) -> None:
    try:
        out = sysctl.validate("min_free_kbytes", str(value))
    except InvalidValue:
        assert not 10240 <= value <= 10485760
    else:
        assert 10240 <= int(out) <= 10485760
