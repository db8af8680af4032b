"""Per-cgroup hardware/software event counts (koordlet's ``perf_group``), for CPI = cycles / instructions.

Layer: ``koordlet.system``. The syscalls are the C helper's (``native.PerfGroups``): one event group per
online CPU, in cgroup mode (``PERF_FLAG_PID_CGROUP`` with the cgroup directory's fd), which counts every
task of the cgroup and its descendants wherever it runs. This module names events, finds the
perf_event cgroup of a container, scales multiplexed counts (``value * enabled / running``, as koordlet
does) and turns every "cannot" into :class:`ResourceUnsupported` with the reason: no compiled helper,
``perf_event_paranoid`` without privilege, an event the CPU or VM does not offer (a VM without a virtual
PMU has no ``cycles``/``instructions``; software events such as ``task-clock`` still work), or no
perf_event hierarchy mounted.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType

from koordlet.api.errors import CgroupGone, ResourceUnsupported
from koordlet.system import native
from koordlet.system.cgroups import CgroupMode, check_cgroup_dir
from koordlet.system.paths import HostPaths

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1

EVENTS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        "cycles": (PERF_TYPE_HARDWARE, 0),  # PERF_COUNT_HW_CPU_CYCLES
        "instructions": (PERF_TYPE_HARDWARE, 1),  # PERF_COUNT_HW_INSTRUCTIONS
        "cpu-clock": (PERF_TYPE_SOFTWARE, 0),
        "task-clock": (PERF_TYPE_SOFTWARE, 1),  # ns on CPU
        "page-faults": (PERF_TYPE_SOFTWARE, 2),
        "context-switches": (PERF_TYPE_SOFTWARE, 3),
    }
)
"""Event names as ``perf list`` spells them -> ``(perf_event_attr.type, .config)``."""
CPI_EVENTS = ("cycles", "instructions")
"""koordlet's CPICollector events (``container_cpi{cpi_resource=cycle|instruction}``)."""

_UNSUPPORTED_ERRNOS = frozenset({errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL})


def _event(name: str) -> tuple[int, int]:
    try:
        return EVENTS[name]
    except KeyError:
        raise ResourceUnsupported(f"unknown perf event {name!r} (known: {', '.join(EVENTS)})") from None


def paranoid_level(paths: HostPaths) -> int | None:
    try:
        return int(paths.proc("sys", "kernel", "perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def check_events(paths: HostPaths, events: Sequence[str]) -> None:
    """Raise :class:`ResourceUnsupported` saying why ``events`` cannot be counted per cgroup here."""
    if not native.HAS_NATIVE:
        raise ResourceUnsupported("perf counting needs the compiled helper (koordlet.system._native)")
    level = paranoid_level(paths)
    if level is None:
        raise ResourceUnsupported(
            "perf_event_open is not available (no perf_event_paranoid: kernel without perf)"
        )
    if os.geteuid() != 0 and level > 0:
        # per-CPU (cgroup mode) events need CAP_PERFMON/CAP_SYS_ADMIN or paranoid <= 0
        raise ResourceUnsupported(
            f"perf_event_paranoid is {level}: per-cgroup counting needs root or CAP_PERFMON"
        )
    for name in events:
        rc = native.perf_probe(*_event(name))
        if rc < 0:
            why = os.strerror(-rc)
            if -rc in (errno.ENOENT, errno.EOPNOTSUPP):
                why += " (no PMU for it: a VM without a virtual PMU has no hardware events)"
            raise ResourceUnsupported(f"perf event {name!r} is not available here: {why}")


def perf_cgroup_dir(paths: HostPaths, mode: CgroupMode, cgroup_dir: str) -> Path:
    """The directory of ``cgroup_dir`` in the perf_event hierarchy: ``perf_event/`` on v1, else the
    cgroup v2 tree (where perf_event is implicit; a hybrid host's is ``unified/``)."""
    rel = check_cgroup_dir(cgroup_dir)
    root = paths.cgroup_root
    if mode is CgroupMode.V1:
        if (root / "perf_event").is_dir():
            base = root / "perf_event"
        elif (root / "unified" / "cgroup.controllers").exists():
            base = root / "unified"
        else:
            raise ResourceUnsupported("no perf_event cgroup hierarchy (v1 perf_event or cgroup2) is mounted")
    else:
        base = root
    return base / rel if rel else base


@dataclass(frozen=True, slots=True)
class PerfSample:
    """Counts over one window, summed over CPUs and scaled for multiplexing."""

    values: Mapping[str, float]
    time_enabled_ns: int
    time_running_ns: int


class CgroupCounters:
    """Counting ``events`` for one cgroup on ``cpus``; :meth:`start`, then :meth:`read` (any number of
    times, counts since start), then :meth:`close` (also as a context manager)."""

    def __init__(self, cgroup_path: Path, cpus: Sequence[int], events: Sequence[str]) -> None:
        if not events:
            raise ValueError("no perf events")
        self.events = tuple(events)
        pairs = [_event(e) for e in self.events]
        try:
            fd = os.open(cgroup_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError as err:
            raise CgroupGone(f"cgroup {cgroup_path} is gone") from err
        try:
            self._groups = native.PerfGroups(fd, cpus, pairs)
        except OSError as err:
            if err.errno in _UNSUPPORTED_ERRNOS or err.errno in (errno.EACCES, errno.EPERM, errno.ENOSYS):
                raise ResourceUnsupported(
                    f"cannot count {', '.join(self.events)} for {cgroup_path}: {err}"
                ) from err
            raise
        finally:
            # the kernel holds its own reference to the cgroup once the events exist
            os.close(fd)

    def start(self) -> None:
        self._groups.enable(True)

    def read(self) -> PerfSample:
        totals = dict.fromkeys(self.events, 0.0)
        enabled = running = 0
        for group in self._groups.read():
            enabled += group.time_enabled
            running += group.time_running
            if group.time_running == 0:
                continue  # the group never got a counter on that CPU: nothing measured there
            scale = group.time_enabled / group.time_running
            for name, value in zip(self.events, group.values, strict=True):
                totals[name] += value * scale
        return PerfSample(MappingProxyType(totals), enabled, running)

    def open_fds(self) -> int:
        return self._groups.open_fds()

    def close(self) -> None:
        self._groups.close()

    def __enter__(self) -> CgroupCounters:
        return self

    def __exit__(
        self, _et: type[BaseException] | None, _ev: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()
