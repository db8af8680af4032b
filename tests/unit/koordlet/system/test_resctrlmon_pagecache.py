"""resctrl monitoring reads on a fake resctrl tree (this host has no RDT), and the node's memory usage
with page cache from /proc/meminfo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordlet.system import resctrlmon
from koordlet.system.paths import HostPaths
from koordlet.system.procfs import read_meminfo
from koordlet.system.resctrlmon import MonData
from koordshared.runtime.errors import InvalidValue
from tests.support.paths import ROOT

MON = ("cat_l3", "mba", *resctrlmon.MON_FLAGS)


def _mon(root: Path, group: str, cache_id: int, llc: str, total: str, local: str | None) -> None:
    d = (root / group if group else root) / "mon_data" / f"mon_L3_{cache_id:02d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "llc_occupancy").write_text(llc + "\n")
    (d / "mbm_total_bytes").write_text(total + "\n")
    if local is not None:
        (d / "mbm_local_bytes").write_text(local + "\n")


def test_mon_data_per_group_and_cache_domain(fake_host: Any) -> None:
    root = fake_host.make_resctrl(cache_ids=(0, 1), flags=MON)
    (root / "info" / "L3_MON").mkdir()
    assert resctrlmon.monitoring_unsupported(fake_host.paths) is None
    _mon(root, "BE", 0, "1048576", "5000", "4000")
    _mon(root, "BE", 1, "Unavailable", "7000", None)
    _mon(root, "", 0, "2097152", "1", "1")
    be = resctrlmon.read_mon_data(fake_host.paths, "BE")
    assert be == {0: MonData(0, 1048576, 5000, 4000), 1: MonData(1, None, 7000, None)}
    assert resctrlmon.read_mon_data(fake_host.paths, "")[0].llc_occupancy == 2097152
    assert resctrlmon.read_mon_data(fake_host.paths, "LS") == {}  # no such group (yet)
    _mon(root, "LS", 0, "lots", "0", "0")
    with pytest.raises(InvalidValue):
        resctrlmon.read_mon_data(fake_host.paths, "LS")


def test_bandwidth_from_two_samples() -> None:
    a, b = MonData(0, 1, 1_000, 500), MonData(0, 1, 5_000, 2_500)
    assert resctrlmon.bandwidth(a, b, 2.0) == resctrlmon.Bandwidth(2000.0, 1000.0)
    # a re-made group starts its counters again: no rate rather than a negative one
    assert resctrlmon.bandwidth(b, a, 2.0) == resctrlmon.Bandwidth(None, None)
    assert resctrlmon.bandwidth(a, MonData(0, None, None, 900), 1.0) == resctrlmon.Bandwidth(None, 400.0)
    with pytest.raises(ValueError):
        resctrlmon.bandwidth(a, b, 0)


def test_why_monitoring_is_unsupported(fake_host: Any) -> None:
    fake_host.make_resctrl(flags=("cat_l3", "mba"))
    assert "lacks cqm_llc" in str(resctrlmon.monitoring_unsupported(fake_host.paths))
    fake_host.make_resctrl(vendor="HygonGenuine", flags=MON)
    assert "vendor" in str(resctrlmon.monitoring_unsupported(fake_host.paths))
    fake_host.make_resctrl(flags=MON)
    assert "L3_MON" in str(resctrlmon.monitoring_unsupported(fake_host.paths))


def test_this_host_has_no_rdt_monitoring() -> None:
    # checked on this machine: no cqm_* flags in /proc/cpuinfo and no resctrl filesystem
    why = resctrlmon.monitoring_unsupported(HostPaths())
    flags = Path("/proc/cpuinfo").read_text()
    if "cqm_llc" in flags and Path("/sys/fs/resctrl/info").is_dir():
        pytest.skip("this host has resctrl monitoring")
    assert why is not None


def test_node_memory_with_page_cache_from_meminfo() -> None:
    fixtures = ROOT / "tests" / "fixtures" / "proc"
    mem = read_meminfo(HostPaths(proc_root=fixtures))
    # koordlet's MemUsageWithPageCache: MemTotal - MemFree
    assert mem.used_with_page_cache == mem.total - mem.get("MemFree") > mem.used
