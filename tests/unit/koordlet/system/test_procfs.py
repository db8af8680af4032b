"""procfs parsers against checked-in fixtures (captured from a real host) and malformed text."""

from __future__ import annotations

import pytest

from koordlet.system.paths import HostPaths
from koordlet.system.procfs import (
    clock_ticks,
    parse_meminfo,
    parse_proc_stat,
    parse_psi,
    read_meminfo,
)
from koordshared.runtime.errors import InvalidValue
from tests.support.fakehost import FakeHost
from tests.support.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "proc"
FIXTURE_PATHS = HostPaths(proc_root=FIXTURES)


def _cpu_line(name: str) -> list[int]:
    for line in (FIXTURES / "stat").read_text().splitlines():
        if line.split()[0] == name:
            return [int(v) for v in line.split()[1:]]
    raise AssertionError(name)


def test_proc_stat_fixture_busy_excludes_idle_and_iowait() -> None:
    stat = parse_proc_stat((FIXTURES / "stat").read_text())
    user, nice, system, idle, iowait, irq, softirq, *_ = _cpu_line("cpu")
    assert stat.total.busy == user + nice + system + irq + softirq
    assert stat.total.idle == idle and stat.total.iowait == iowait
    assert sorted(stat.per_cpu) == list(range(len(stat.per_cpu)))
    assert stat.per_cpu[0].user == _cpu_line("cpu0")[0]


def test_proc_stat_from_fake_host(fake_host: FakeHost) -> None:
    fake_host.write_proc_stat(user=100, nice=5, system=50, idle=1000, iowait=70, irq=3, softirq=2, steal=9)
    assert parse_proc_stat(fake_host.read("proc/stat")).total.busy == 160
    fake_host.write_proc_stat(user=130, nice=5, system=60, idle=1100, iowait=90, irq=3, softirq=2)
    assert parse_proc_stat(fake_host.read("proc/stat")).total.busy == 200


@pytest.mark.parametrize("text", ["", "intr 1 2\n", "cpu  1 2 3\n", "cpu  a b c d e f g\n"])
def test_proc_stat_malformed(text: str) -> None:
    with pytest.raises(InvalidValue):
        parse_proc_stat(text)


def test_meminfo_fixture() -> None:
    mem = read_meminfo(FIXTURE_PATHS)
    fields = {
        line.split(":")[0]: int(line.split()[1]) for line in (FIXTURES / "meminfo").read_text().splitlines()
    }
    assert mem.total == fields["MemTotal"] * 1024
    assert mem.used == (fields["MemTotal"] - fields["MemAvailable"]) * 1024
    assert mem.get("Active(file)") == fields["Active(file)"] * 1024
    assert mem.get("HugePages_Total") == fields["HugePages_Total"]  # no kB unit: a count


def test_meminfo_fake_and_malformed(fake_host: FakeHost) -> None:
    fake_host.write_meminfo(total_kib=1000, available_kib=400, free_kib=100)
    mem = read_meminfo(fake_host.paths)
    assert mem.used == 600 * 1024
    with pytest.raises(InvalidValue):
        parse_meminfo("MemTotal: 10 kB\n")
    with pytest.raises(InvalidValue):
        parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB\n")


def test_psi_fixtures() -> None:
    for res in ("cpu", "memory", "io"):
        psi = parse_psi((FIXTURES / "pressure" / res).read_text())
        text = (FIXTURES / "pressure" / res).read_text().splitlines()[0]
        assert psi.some.total_us == int(text.rsplit("total=", 1)[1])
        assert 0.0 <= psi.some.avg10 <= 100.0


def test_psi_parse_some_only_and_malformed() -> None:
    psi = parse_psi("some avg10=1.50 avg60=2.00 avg300=0.25 total=12345\n")
    assert (psi.some.avg10, psi.some.avg60, psi.some.avg300, psi.some.total_us) == (1.5, 2.0, 0.25, 12345)
    assert psi.full is None
    full = parse_psi("some avg10=0 avg60=0 avg300=0 total=1\nfull avg10=3.0 avg60=0 avg300=0 total=9\n").full
    assert full is not None and full.avg10 == 3.0 and full.total_us == 9
    for bad in (
        "",
        "full avg10=1 avg60=1 avg300=1 total=1\n",
        "some avg10=x avg60=1 avg300=1 total=1\n",
        "some avg10=1 avg60=1\n",
    ):
        with pytest.raises(InvalidValue):
            parse_psi(bad)


def test_clock_ticks_is_positive() -> None:
    assert clock_ticks() > 0
