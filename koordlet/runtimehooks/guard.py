"""Out-of-band changes to the hooks' values, seen as they happen: inotify ``IN_MODIFY`` on the cgroup dirs
where the hooks own values (the kernel raises it on the directory for every ``write(2)`` to a file in it),
so a value someone else writes (the kubelet re-applying a pod's resources, an operator) is re-checked and
restored at once instead of at the executor's next forced update.

The reconciler tells the guard after each pass which dirs hold its values (:meth:`Guard.watch`); an event on
one of the hooks' files there asks for a pass over that pod that does not trust the executor's cache (the
pass reads the file and writes only if it differs, so the hooks' own writes settle after one read). At most
:data:`MAX_WATCHES` dirs are watched; values beyond that are still restored by the periodic pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from koordlet.api.errors import UnsafePath
from koordlet.runtimehooks.writes import FILES
from koordlet.system import cgroups
from koordlet.system.cgroups import CgroupMode
from koordlet.system.inotify import IN_MODIFY, Inotify, open_or_fallback
from koordlet.system.paths import HostPaths

log = logging.getLogger(__name__)

MAX_WATCHES = 8192
MIN_INTERVAL = 0.2
"""Seconds between two verifications of one pod."""
IDLE_WAIT = 30.0
"""Seconds the guard sleeps with no verify due; events and :meth:`Guard.close` wake it (a half-second poll
to look at stop was two of an idle agent's wake-ups a second)."""
_RESOURCES = tuple(resource for _, resource in FILES)


def _watched_files(mode: CgroupMode) -> frozenset[str]:
    """The names of the hooks' files on this cgroup version (``cpu.max`` rather than the quota file...)."""
    names = set()
    for resource in _RESOURCES:
        res = cgroups.get_resource(resource)
        name = res.v1_file if mode is CgroupMode.V1 else res.v2_file
        if name:
            names.add(name)
    return frozenset(names)


class Guard:
    def __init__(self, paths: HostPaths, mode: CgroupMode, on_change: Callable[[set[str]], None]) -> None:
        """``on_change(pod uids)`` when files of those pods were written by someone."""
        self.paths = paths
        self.mode = mode
        self.on_change = on_change
        self.files = _watched_files(mode)
        # v2 has one tree: any subsystem name gives the same dir
        self._subsystems = ("cpu", "cpuset", "memory") if mode is CgroupMode.V1 else ("cpu",)
        self._lock = threading.Lock()
        self._owner: dict[Path, str] = {}
        self._asked: tuple[dict[str, tuple[str, ...]], int] | None = None
        """The last dirs asked for and the watches then held, when every one of them is watched: the same
        request again (most passes) costs one comparison instead of a thousand pods' paths built and
        looked up. A watch the kernel dropped (its dir removed) changes the count, so it is asked again."""
        self._ino: Inotify | None = None
        self._guarded: frozenset[str] = frozenset()
        self._paths_by_pod: dict[str, tuple[tuple[str, ...], tuple[Path, ...]]] = {}
        """Per pod: the dirs last asked for and the paths they give (only the caller's thread)."""
        self.events = 0

    def guarded(self) -> frozenset[str]:
        """The pods whose every dir asked for is watched now (none while the guard is not running)."""
        with self._lock:
            ino = self._ino
            if ino is None:
                return frozenset()
            asked = self._asked
            if asked is not None and asked[1] == len(ino.watched):
                return self._guarded
            # a watch the kernel dropped (its dir removed) since: that pod is not guarded now
            dropped = {uid for path, uid in self._owner.items() if path not in ino.watched}
            return self._guarded - dropped

    def watch(self, dirs_by_pod: Mapping[str, Iterable[str]]) -> None:
        """Watch exactly these pods' dirs (pod uid -> cgroup dirs)."""
        asked = {uid: tuple(dirs) for uid, dirs in dirs_by_pod.items()}
        with self._lock:
            last, ino = self._asked, self._ino
            if ino is not None and last is not None and last[1] == len(ino.watched) and last[0] == asked:
                return
        wanted: dict[Path, str] = {}
        # A pod's paths are built once while its dirs stay the same: a pod coming or going built and
        # checked every pod's paths again (six per pod on v1).
        known, paths_by_pod = self._paths_by_pod, {}
        for uid, dirs in asked.items():
            hit = known.get(uid)
            if hit is None or hit[0] != dirs:
                built: list[Path] = []
                for d in dirs:
                    for sub in self._subsystems:
                        try:
                            built.append(cgroups.cgroup_dir_path(self.paths, self.mode, sub, d))
                        except UnsafePath:  # never for a pod's dirs (built from validated ids)
                            continue
                hit = (dirs, tuple(built))
            paths_by_pod[uid] = hit
            for path in hit[1]:
                wanted[path] = uid
        self._paths_by_pod = paths_by_pod
        with self._lock:
            ino = self._ino
            if ino is None:
                self._owner = wanted
                return
            for path in [p for p in self._owner if p not in wanted]:
                ino.remove_watch(path)
            owner = {}
            for path, uid in wanted.items():
                if path not in ino.watched:
                    if len(ino.watched) >= MAX_WATCHES:
                        continue
                    try:
                        ino.add_watch(path, IN_MODIFY)
                    except OSError:
                        continue  # not there (yet): the next pass asks again
                owner[path] = uid
            self._owner = owner
            self._asked = (asked, len(ino.watched)) if len(owner) == len(wanted) else None
            unwatched = {uid for path, uid in wanted.items() if path not in owner}
            self._guarded = frozenset(uid for uid in asked if uid not in unwatched)

    def close(self) -> None:
        """Wake :meth:`run` to see its stop Event (the runtime hooks' shutdown, after stop is set)."""
        with self._lock:
            if self._ino is not None:
                self._ino.wake()

    def run(self, stop: threading.Event) -> None:
        # Without one no pod is guarded, so every timed pass of the hooks checks every pod: dearer, as safe.
        ino = open_or_fallback(log, "runtime hooks guard", "every pass checks every pod")
        if ino is None:
            return
        with ino:
            with self._lock:
                self._ino = ino
                pending = self._owner
                self._owner = {}
            self._rewatch(pending)
            try:
                self._loop(ino, stop)
            finally:
                with self._lock:
                    self._ino = None

    def _loop(self, ino: Inotify, stop: threading.Event) -> None:
        last: dict[str, float] = {}
        due: dict[str, float] = {}
        while not stop.is_set():
            now = time.monotonic()
            wait = min([IDLE_WAIT, *(t - now for t in due.values())])
            batch = ino.read(max(wait, 0.0))
            touched: set[str] = set()
            with self._lock:
                for ev in batch:
                    if ev.overflow:
                        touched.update(self._owner.values())
                    elif ev.mask & IN_MODIFY and ev.name in self.files:
                        uid = self._owner.get(ev.directory)
                        if uid is not None:
                            touched.add(uid)
            now = time.monotonic()
            for uid in touched:
                # one verify per pod per MIN_INTERVAL: a value that never read back as written cannot
                # turn write -> event -> write into a busy loop
                due.setdefault(uid, max(now, last.get(uid, 0.0) + MIN_INTERVAL))
            if len(last) > MAX_WATCHES:  # forget pods verified long ago
                last = {uid: t for uid, t in last.items() if now - t < MIN_INTERVAL}
            ready = {uid for uid, t in due.items() if t <= now}
            if ready:
                for uid in ready:
                    del due[uid]
                    last[uid] = now
                self.events += 1
                self.on_change(ready)

    def _rewatch(self, pending: Mapping[Path, str]) -> None:
        with self._lock:
            ino = self._ino
            assert ino is not None
            for path, uid in pending.items():
                if len(ino.watched) >= MAX_WATCHES:
                    break
                try:
                    ino.add_watch(path, IN_MODIFY)
                except OSError:
                    continue
                self._owner[path] = uid
            # what watch() asked before the loop ran: a pod is guarded once each of its dirs is
            unwatched = {uid for path, uid in pending.items() if path not in self._owner}
            self._guarded = frozenset(uid for uid in pending.values() if uid not in unwatched)
