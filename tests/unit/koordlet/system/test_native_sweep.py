"""The C column sweep (``NativeSweep``) over a C reader's last read: rates, memory and throttled ratios as
the Python sweep computes them, every refusal leaving the baselines as they were, no read out of bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.system import native
from koordlet.system.batchread import FileKind

pytestmark = pytest.mark.native

# one target: cpuacct.usage (slot 0), memory.stat's three keys (1-3), cpu.stat's two (4-5)
MEM_KEYS = ("inactive_anon", "active_anon", "unevictable")
THR_KEYS = ("nr_periods", "nr_throttled")


def write(d: Path, j: int, cpu: int, mem: tuple[int, int, int], periods: int, throttled: int) -> None:
    (d / f"cpu{j}").write_text(f"{cpu}\n")
    (d / f"mem{j}").write_text("".join(f"{k} {v}\n" for k, v in zip(MEM_KEYS, mem, strict=True)))
    (d / f"thr{j}").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 0\n")


def reader_of(d: Path, n: int) -> native.NativeBatchReader:
    paths = [d / f"{f}{j}" for j in range(n) for f in ("cpu", "mem", "thr")]
    kinds = [FileKind.COUNTER, FileKind.KEY_VALUE, FileKind.KEY_VALUE] * n
    return native.NativeBatchReader(paths, kinds, [(), MEM_KEYS, THR_KEYS] * n)


def sweep_of(reader: native.NativeBatchReader, n: int) -> native.NativeSweep:
    sweep = native.NativeSweep(reader)
    sweep.plan([6 * j for j in range(n)], [6 * j + 1 for j in range(n)], [6 * j + 4 for j in range(n)])
    return sweep


def test_rates_memory_and_ratios_as_python_divides_them(tmp_path: Path) -> None:
    write(tmp_path, 0, 10**9 + 123_456_789, (1, 2, 3), 30, 7)
    write(tmp_path, 1, 5_000, (4, 0, 0), 11, 0)
    with reader_of(tmp_path, 2) as reader:
        sweep = sweep_of(reader, 2)
        assert sweep.load([1_000, 5_000], [10, 11], [2, 0], set())
        assert reader.fill() == 0
        got = sweep.run(1, 1.5, 4e9)
        assert got is not None
        cpu, mem, thr = got
        assert cpu == [(10**9 + 123_456_789 - 1_000) / (1.5 * 1e9), 0.0]
        assert mem == [6.0, 4.0]
        assert thr == [5 / 20, 0.0]  # no period elapsed: no throttling, not a division by zero
        assert sweep.baselines() == ([10**9 + 123_456_789, 5_000], [30, 11], [7, 0])


def test_a_scaled_counter_and_a_fresh_target(tmp_path: Path) -> None:
    """v2 counts CPU in microseconds (scale 1000); a target without a baseline gets memory and a baseline,
    no checked delta (its old counters are anything), and is no longer fresh after the sweep."""
    write(tmp_path, 0, 2_000, (0, 8, 0), 5, 1)
    write(tmp_path, 1, 7, (1, 1, 1), 3, 3)
    with reader_of(tmp_path, 2) as reader:
        sweep = sweep_of(reader, 2)
        assert sweep.load([1_000_000, 99**9], [5, 99], [1, 99], {1})
        reader.fill()
        got = sweep.run(1000, 1.0, 2e9)
        assert got == ([1_000_000 / 1e9, 0.0], [8.0, 3.0], [0.0, 0.0])
        assert sweep.baselines() == ([2_000_000, 7_000], [5, 3], [1, 3])
        write(tmp_path, 1, 6, (1, 1, 1), 3, 3)  # went back: refused now that it has a baseline
        reader.fill()
        assert sweep.run(1000, 1.0, 2e9) is None


@pytest.mark.parametrize(
    ("cpu", "mem", "periods", "throttled", "limit"),
    [
        (900, (1, 1, 1), 20, 5, 1e9),  # the CPU counter went back (a reset)
        (2_000, (1, 1, 1), 9, 5, 1e9),  # periods went back
        (2_000, (1, 1, 1), 20, 1, 1e9),  # throttled went back
        (10**12, (1, 1, 1), 20, 5, 1e9),  # more CPU than the node has
        (2_000, (2**62, 2**62, 0), 20, 5, 1e9),  # a sum past 64 bits
    ],
)
def test_a_refused_sweep_moves_no_baseline(
    tmp_path: Path, cpu: int, mem: tuple[int, int, int], periods: int, throttled: int, limit: float
) -> None:
    write(tmp_path, 0, 1_500, (1, 1, 1), 20, 5)
    write(tmp_path, 1, cpu, mem, periods, throttled)
    with reader_of(tmp_path, 2) as reader:
        sweep = sweep_of(reader, 2)
        before = ([1_000, 1_000], [10, 10], [2, 2])
        assert sweep.load(*before, set())
        reader.fill()
        assert sweep.run(1, 1.0, limit) is None
        assert sweep.baselines() == before


def test_a_missing_key_or_a_gone_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, 0, 1_500, (1, 1, 1), 20, 5)
    with reader_of(tmp_path, 1) as reader:
        sweep = sweep_of(reader, 1)
        assert sweep.load([1_000], [10], [2], set())
        (tmp_path / "mem0").write_text("inactive_anon 1\nactive_anon 2\n")
        reader.fill()
        assert sweep.run(1, 1.0, 1e9) is None
        assert sweep.baselines() == ([1_000], [10], [2])
    write(tmp_path, 0, 1_500, (1, 1, 1), 20, 5)
    (tmp_path / "thr0").unlink()  # before the first open: a held descriptor would still read it
    with reader_of(tmp_path, 1) as reader:
        sweep = sweep_of(reader, 1)
        assert sweep.load([1_000], [10], [2], set())
        assert reader.fill() == 1
        assert sweep.run(1, 1.0, 1e9) is None
        assert sweep.baselines() == ([1_000], [10], [2])


def test_a_plan_past_the_read_slots_is_refused_not_read(tmp_path: Path) -> None:
    write(tmp_path, 0, 1_500, (1, 1, 1), 20, 5)
    with reader_of(tmp_path, 1) as reader:
        sweep = native.NativeSweep(reader)
        sweep.plan([0], [1], [5])  # throttling's two slots would be 5 and 6: one past the read
        assert sweep.load([1_000], [10], [2], set())
        reader.fill()
        assert sweep.run(1, 1.0, 1e9) is None
        with pytest.raises(ValueError, match="negative"):
            sweep.plan([-1], [1], [4])


def test_a_baseline_past_64_bits_stays_with_the_python_sweep(tmp_path: Path) -> None:
    with reader_of(tmp_path, 1) as reader:
        sweep = sweep_of(reader, 1)
        assert not sweep.load([2**63], [0], [0], set())
        with pytest.raises(ValueError, match="outside the plan"):
            sweep.load([0], [0], [0], {1})


def test_the_results_are_those_of_the_last_fill_of_the_same_files(tmp_path: Path) -> None:
    write(tmp_path, 0, 1_500, (1, 1, 1), 20, 5)
    write(tmp_path, 1, 2_500, (1, 1, 1), 20, 5)
    with reader_of(tmp_path, 2) as reader:
        with pytest.raises(ValueError, match="no read"):
            reader.results()
        reader.fill()
        assert reader.results().values[0] == 1_500
        reader.swap(0, 3)
        with pytest.raises(ValueError, match="no read"):
            reader.results()  # the buffers hold the files' old places
        reader.fill()
        assert reader.results().values[0] == 2_500
