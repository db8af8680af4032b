"""The C batch reader and the pure-Python one, run on the same tmp files: identical results and errors."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet.system import batchread, native
from koordlet.system.batchread import MISSING, FileKind
from tests.support.batchread import file_values

IMPLS = ["python", pytest.param("native", marks=pytest.mark.native)]

MEMORY_STAT = (
    "cache 4096\nrss 8192\ntotal_cache 123456\ntotal_rss 7890\ntotal_inactive_file 11\n"
    "total_active_file 22\ntotal_unevictable 0\n"
)
MEM_KEYS = ("total_cache", "total_rss", "total_inactive_file", "total_active_file", "total_unevictable")


def _open(
    impl: str,
    paths: Sequence[str | Path],
    kinds: Sequence[FileKind],
    keys: Sequence[Sequence[str]],
    **kw: int,
) -> batchread.BatchReader:
    return native.open_batch_reader(paths, kinds, keys, force_python=impl == "python", **kw)


def _tree(tmp_path: Path, n: int) -> tuple[list[Path], list[FileKind], list[tuple[str, ...]]]:
    paths: list[Path] = []
    kinds: list[FileKind] = []
    keys: list[tuple[str, ...]] = []
    for i in range(n):
        d = tmp_path / f"c{i}"
        d.mkdir()
        (d / "cpuacct.usage").write_text(f"{1000 + i}\n")
        (d / "memory.stat").write_text(MEMORY_STAT.replace("123456", str(123456 + i)))
        paths += [d / "cpuacct.usage", d / "memory.stat"]
        kinds += [FileKind.COUNTER, FileKind.KEY_VALUE]
        keys += [(), MEM_KEYS]
    return paths, kinds, keys


@pytest.mark.parametrize("impl", IMPLS)
def test_reads_counters_and_keys(tmp_path: Path, impl: str) -> None:
    paths, kinds, keys = _tree(tmp_path, 3)
    with _open(impl, paths, kinds, keys) as reader:
        res = reader.read()
        assert res.status == [0] * 6
        for i in range(3):
            assert file_values(res, 2 * i) == 1000 + i
            assert file_values(res, 2 * i + 1) == {
                "total_cache": 123456 + i,
                "total_rss": 7890,
                "total_inactive_file": 11,
                "total_active_file": 22,
                "total_unevictable": 0,
            }
        # the fds are cached: a second sweep sees new content through the same descriptors
        assert reader.open_fds() == 6
        (tmp_path / "c1" / "cpuacct.usage").write_text("5\n")
        assert reader.read().value(2) == 5
        assert reader.open_fds() == 6
    assert reader.open_fds() == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_missing_key_is_sentinel_and_bad_value_is_einval(tmp_path: Path, impl: str) -> None:
    (tmp_path / "cpu.stat").write_text("nr_periods 10\nnr_throttled x\nthrottled_time 7\n")
    (tmp_path / "other.stat").write_text("a 1\nb 2\n")
    paths = [tmp_path / "cpu.stat", tmp_path / "cpu.stat", tmp_path / "other.stat"]
    kinds = [FileKind.KEY_VALUE] * 3
    keys = [("nr_periods", "throttled_time"), ("nr_periods", "nr_throttled"), ("b", "zz")]
    with _open(impl, paths, kinds, keys) as reader:
        res = reader.read()
    assert res.status == [0, -errno.EINVAL, 0]
    assert file_values(res, 0) == {"nr_periods": 10, "throttled_time": 7}
    assert file_values(res, 1) is None
    assert res.values[res.layout.offsets[1] : res.layout.offsets[2]] == [MISSING, MISSING]
    assert file_values(res, 2) == {"b": 2, "zz": None}


@pytest.mark.parametrize("impl", IMPLS)
def test_vanished_file_is_gone_and_comes_back(tmp_path: Path, impl: str) -> None:
    paths, kinds, keys = _tree(tmp_path, 2)
    with _open(impl, paths, kinds, keys) as reader:
        assert reader.read().status == [0, 0, 0, 0]
        # a regular file keeps working through a held fd after unlink; a fresh reader opens nothing
        for p in paths[:2]:
            p.unlink()
        with _open(impl, paths, kinds, keys) as fresh:
            res = fresh.read()
            assert res.status[:2] == [-errno.ENOENT, -errno.ENOENT]
            assert res.gone(0) and res.gone(1) and not res.gone(2)
            assert res.value(0) is None
            assert res.status[2:] == [0, 0]
            assert fresh.open_fds() == 2
            (tmp_path / "c0" / "cpuacct.usage").write_text("77\n")
            res = fresh.read()
            assert res.status[0] == 0 and res.value(0) == 77
            assert fresh.open_fds() == 3


@pytest.mark.parametrize("impl", IMPLS)
def test_overflowing_buffer_and_max(tmp_path: Path, impl: str) -> None:
    (tmp_path / "big").write_text("k 1\n" * 100)
    (tmp_path / "limit").write_text("max\n")
    (tmp_path / "huge").write_text("99999999999999999999\n")
    paths = [tmp_path / "big", tmp_path / "limit", tmp_path / "huge"]
    kinds = [FileKind.KEY_VALUE, FileKind.COUNTER, FileKind.COUNTER]
    with _open(impl, paths, kinds, [("k",), (), ()], bufsize=128) as reader:
        res = reader.read()
    assert res.status == [-errno.EOVERFLOW, 0, -errno.ERANGE]
    assert res.value(1) == batchread.INT64_MAX


def test_layout_rejects_bad_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        batchread.PyBatchReader([tmp_path / "x"], [FileKind.KEY_VALUE], [("has space",)])
    with pytest.raises(ValueError):
        batchread.PyBatchReader([tmp_path / "x"], [FileKind.KEY_VALUE], [()])
    with pytest.raises(ValueError):
        batchread.PyBatchReader([tmp_path / "x"], [FileKind.COUNTER, FileKind.COUNTER], [(), ()])


_token = st.one_of(
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1).map(str),
    st.integers(min_value=2**63, max_value=2**70).map(str),
    st.sampled_from(["max", "-", "", "--1", "+5", "1_0", "0x10", " 7", "7 ", "0007", "-0", "\u0663", "5\r"]),
)
_key = st.sampled_from(["a", "b", "cc", "total_rss", "", "a\r"])
_line = st.tuples(_key, st.sampled_from([" ", "  ", "\t", ""]), _token).map(lambda t: f"{t[0]}{t[1]}{t[2]}")


@pytest.mark.native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counter=_token,
    lines=st.lists(_line, max_size=8),
    trailing=st.sampled_from(["", "\n", "\r\n", "\n\n"]),
    keys=st.lists(st.sampled_from(["a", "b", "cc", "total_rss"]), min_size=1, max_size=4),
)
def test_c_and_python_agree_on_any_content(
    tmp_path: Path, counter: str, lines: list[str], trailing: str, keys: list[str]
) -> None:
    (tmp_path / "counter").write_bytes((counter + trailing).encode())
    (tmp_path / "kv").write_bytes(("\n".join(lines) + trailing).encode())
    paths = [tmp_path / "counter", tmp_path / "kv"]
    kinds = [FileKind.COUNTER, FileKind.KEY_VALUE]
    args = (paths, kinds, [(), tuple(keys)])
    with native.NativeBatchReader(*args) as c_reader, batchread.PyBatchReader(*args) as py_reader:
        c_res, py_res = c_reader.read(), py_reader.read()
    assert c_res.status == py_res.status
    assert c_res.values == py_res.values


@pytest.mark.parametrize("impl", IMPLS)
def test_cpu_lists_count_cpus(tmp_path: Path, impl: str) -> None:
    cases = {
        "0-3,8\n": 4 + 1,
        "\n": 0,
        "5": 1,
        "0-1,4-5,10-11\n": 6,
        "65535": 1,
        "3-1\n": -errno.EINVAL,
        "1,,2\n": -errno.EINVAL,
        "1,\n": -errno.EINVAL,
        "0-\n": -errno.EINVAL,
        "a\n": -errno.EINVAL,
        "65536\n": -errno.ERANGE,
    }
    paths = []
    for i, text in enumerate(cases):
        paths.append(tmp_path / f"cpus{i}")
        paths[-1].write_text(text)
    with _open(impl, paths, [FileKind.CPU_LIST] * len(paths), [()] * len(paths)) as reader:
        res = reader.read()
    for i, want in enumerate(cases.values()):
        if want >= 0:
            assert (res.status[i], res.value(i)) == (0, want), list(cases)[i]
        else:
            assert (res.status[i], res.value(i)) == (want, None), list(cases)[i]


@pytest.mark.native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="0123456789-,\n x", max_size=24))
def test_c_and_python_agree_on_any_cpu_list(tmp_path: Path, text: str) -> None:
    (tmp_path / "cpus").write_bytes(text.encode())
    args = ([tmp_path / "cpus"], [FileKind.CPU_LIST], [()])
    with native.NativeBatchReader(*args) as c_reader, batchread.PyBatchReader(*args) as py_reader:
        c_res, py_res = c_reader.read(), py_reader.read()
    assert (c_res.status, c_res.values) == (py_res.status, py_res.values)


@pytest.mark.parametrize("impl", IMPLS)
def test_write_batch_reports_errno_per_item_in_order(tmp_path: Path, impl: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old")
    b.write_text("old")
    readonly = tmp_path / "ro"
    readonly.mkdir()
    errs = native.write_batch(
        [(a, "1"), (tmp_path / "missing" / "x", "2"), (readonly, b"3"), (b, "4"), (a, "5")],
        force_python=impl == "python",
    )
    assert errs == [0, errno.ENOENT, errno.EISDIR, 0, 0]
    # in order, each opened fresh (O_TRUNC, like `echo >`): the later write to `a` wins
    assert a.read_text() == "5"
    assert b.read_text() == "4"
    assert native.write_batch([], force_python=impl == "python") == []


@pytest.mark.parametrize("impl", IMPLS)
def test_write_schemata_returns_last_cmd_status_on_failure(tmp_path: Path, impl: str) -> None:
    info = tmp_path / "info"
    info.mkdir()
    (info / "last_cmd_status").write_text("Mask out of range\n")
    group = tmp_path / "BE"
    group.mkdir()
    (group / "schemata").write_text("L3:0=fff\n")
    ok = native.write_schemata(
        group / "schemata", "L3:0=f\n", info / "last_cmd_status", force_python=impl == "python"
    )
    assert ok.ok and ok.message == ""
    assert (group / "schemata").read_text() == "L3:0=f\n"
    bad = native.write_schemata(
        tmp_path / "gone" / "schemata", "L3:0=f\n", info / "last_cmd_status", force_python=impl == "python"
    )
    assert bad.errno == errno.ENOENT
    assert bad.message == "Mask out of range"
    assert not bad.ok


@pytest.mark.native
def test_fds_do_not_leak_across_churn(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_text("")

    def lowest_free_fd() -> int:
        fd = os.open(probe, os.O_RDONLY)
        os.close(fd)
        return fd

    paths, kinds, keys = _tree(tmp_path, 4)
    before = lowest_free_fd()
    for impl in ["python", "native"]:
        for _ in range(20):
            with _open(impl, paths, kinds, keys) as reader:
                reader.read()
                assert lowest_free_fd() > before
    assert lowest_free_fd() == before


@pytest.mark.parametrize("impl", IMPLS)
def test_files_change_in_place_without_reopening_the_others(tmp_path: Path, impl: str) -> None:
    """Swap, truncate and extend: the reader keeps every other file's descriptor (a pod coming
    or going no longer rebuilds a reader of thousands of files) and reads as a fresh one would."""
    paths, kinds, keys = _tree(tmp_path, 5)
    with _open(impl, paths, kinds, keys) as reader:
        reader.read()
        assert reader.open_fds() == 10
        reader.swap(0, 8)  # c0's counter and c4's trade places, descriptors too
        reader.swap(1, 9)
        with pytest.raises((ValueError, OSError)):
            reader.swap(0, 1)  # a counter and a key-value file
        assert reader.open_fds() == 10
        reader.truncate(8)  # c0 goes (it was moved last)
        assert reader.open_fds() == 8
        new = tmp_path / "c9"
        new.mkdir()
        (new / "cpuacct.usage").write_text("7\n")
        (new / "memory.stat").write_text(MEMORY_STAT)
        reader.extend([new / "cpuacct.usage", new / "memory.stat"], kinds[:2], keys[:2])
        res = reader.read()
        assert reader.open_fds() == 10
        fresh = _open(impl, reader.layout.paths, reader.layout.kinds, reader.layout.keys)
        with fresh:
            want = fresh.read()
        assert (res.status, res.values) == (want.status, want.values)
        assert [file_values(res, i) for i in (0, 2, 8)] == [1004, 1001, 7]
        assert reader.layout.offsets == want.layout.offsets and reader.layout.slots == want.layout.slots
        reader.truncate(0)
        assert reader.read().values == [] and reader.open_fds() == 0
        reader.extend(paths[:2], kinds[:2], keys[:2])
        assert file_values(reader.read(), 0) == 1000
