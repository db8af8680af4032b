"""Pod lifecycle event generator: inotify on the kubepods tier dirs triggers early pod refreshes.

koordlet watches ``<cgroup root>/cpu/<tier>`` (v1; the unified tree on v2) for the three tiers, since
kubelet creates and removes a pod's cgroup dir there before and after the pod runs. Pod dirs are watched
too, so container dirs appearing (standalone discovery needs their IDs) also trigger a refresh. Tier dirs
that do not exist yet are retried every ``poll``; once all are watched the loop sleeps ``idle_wait``.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from koordlet import api
from koordlet.system.cgroups import cgroup_dir_path
from koordlet.system.host import Host
from koordlet.system.inotify import IN_CREATE, IN_DELETE, Inotify, open_or_fallback

log = logging.getLogger(__name__)

_TIERS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
MAX_WATCHES = 4096
"""Bound on pod-dir watches (the kernel default ``max_user_watches`` is far higher, but stay modest)."""


class PLEG:
    """Calls ``on_event()`` after a burst of pod/container dir creations or removals."""

    def __init__(
        self,
        host: Host,
        on_event: Callable[[], object],
        poll: float = 0.5,
        rescan: float = 60.0,
        on_idle: Callable[[], float | None] | None = None,
        idle_wait: float | None = None,
        on_dirs: Callable[[frozenset[Path] | None], object] | None = None,
    ) -> None:
        """``on_idle`` runs whenever a wait ends without an event; it may ask to be called again sooner
        than ``poll`` (seconds; ``None``: the normal poll). ``idle_wait`` (default ``poll``): the wait once
        every tier is watched, when only a rescan, ``on_idle`` or :meth:`close` has anything for the loop
        (the agent's half-second poll was two of an idle agent's wake-ups a second). ``on_dirs`` hears,
        before each ``on_event``, the pod dirs the events name (a pod dir made or removed, or a container
        dir in it), or ``None`` when they cannot be told: events lost, or a dir not watched (the first
        call, an overflow, a tier or pod dir that could not be watched)."""
        self.host = host
        self.on_event = on_event
        self.on_idle = on_idle
        self.poll = poll
        self.idle_wait = poll if idle_wait is None else idle_wait
        self._ino: Inotify | None = None
        self.rescan = rescan
        self.events = 0
        self.scans = 0
        self._tiers: list[Path] = []
        self._reported: set[Path] = set()
        self.on_dirs = on_dirs
        self._unwatched: set[Path] = set()
        """Pod dirs seen but not watched (a container made in one raises no event)."""

    def _tier_paths(self) -> list[Path]:
        return [
            cgroup_dir_path(self.host.paths, self.host.mode, "cpu", self.host.layout.qos_dir(q))
            for q in _TIERS
        ]

    def _watch(self, ino: Inotify, path: Path) -> bool:
        """Watch ``path`` unless it already is; True when a new watch was added."""
        watched = ino.watched
        if path in watched:
            return False
        if len(watched) >= MAX_WATCHES:
            self._unwatched.add(path)
            return False
        try:
            ino.add_watch(path, IN_CREATE | IN_DELETE)
        except OSError as err:
            if path not in self._reported:  # retried every poll; say it once
                self._reported.add(path)
                log.debug("pleg: cannot watch %s yet: %s", path, str(err))
            self._unwatched.add(path)
            return False
        self._unwatched.discard(path)
        return True

    def _watch_pods(self, ino: Inotify, tier: Path) -> set[Path]:
        """Watch the pod dirs of ``tier``; the ones newly watched."""
        layout = self.host.layout
        try:
            with os.scandir(tier) as it:
                names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            return set()
        return {
            tier / name
            for name in names
            if layout.parse_pod_dir_name(name) is not None and self._watch(ino, tier / name)
        }

    def _watch_tiers(self, ino: Inotify, *, all_pods: bool) -> tuple[bool, set[Path]]:
        """Watch the tier dirs; list the pod dirs of each tier just watched (of all if ``all_pods``).
        Whether a tier is newly watched (pods made in it before raised no event), and the pod dirs newly
        watched in tiers watched before (containers made in one while unwatched raised no event)."""
        if all_pods:
            self.scans += 1
            self._unwatched = {p for p in self._unwatched if p.is_dir()}
        tiers = self._tiers = self._tiers or self._tier_paths()  # built once: every idle wake-up asks
        if not all_pods and all(t in ino.watched for t in tiers):
            return False, set()
        added = False
        found: set[Path] = set()
        for tier in tiers:
            new = self._watch(ino, tier)
            added |= new
            if new or (all_pods and tier in ino.watched):
                pods = self._watch_pods(ino, tier)
                if not new:
                    found |= pods
        return added, found

    def _report(self, dirs: frozenset[Path] | None) -> None:
        ino = self._ino
        if self.on_dirs is not None:
            complete = ino is not None and not self._unwatched
            complete = complete and ino is not None and all(t in ino.watched for t in self._tiers)
            self.on_dirs(dirs if complete else None)
        self.on_event()

    def close(self) -> None:
        """Wake :meth:`run` to see its stop Event (the informer's shutdown, after stop is set)."""
        ino = self._ino
        if ino is not None:
            ino.wake()

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: wait for events and report them (module doc; waits in :meth:`__init__`)."""
        # Without events every discovery lists the whole tree and the kubelet sync's period bounds how
        # late a pod is seen: slower, never wrong.
        ino = open_or_fallback(log, "pleg", "pods are seen at each periodic sync instead")
        if ino is None:
            return
        with ino:
            self._ino = ino
            self._watch_tiers(ino, all_pods=True)
            next_rescan = time.monotonic() + self.rescan
            # Dirs made between the informer's first list and these watches raised no event: one refresh
            # now closes that gap (as an informer lists again once its watch is up).
            self._report(None)
            wait = self.poll
            while not stop.is_set():
                batch = ino.read(wait)
                wait = self.poll
                now = time.monotonic()
                rescan = now >= next_rescan
                if rescan:
                    next_rescan = now + self.rescan
                if not batch:
                    added, found = self._watch_tiers(ino, all_pods=rescan)
                    if added:  # a tier created after we started: pods already in it raised no event
                        self._report(None)
                    elif found:
                        self.events += 1
                        self._report(frozenset(found))
                    idle = self.idle_wait if all(t in ino.watched for t in self._tiers) else self.poll
                    wait = min(idle, max(next_rescan - now, 0.0))
                    if self.on_idle is not None:
                        sooner = self.on_idle()
                        wait = min(wait, sooner) if sooner is not None else wait
                    continue
                layout = self.host.layout
                relevant = lost = False
                dirs: set[Path] = set()
                for ev in batch:
                    if ev.overflow:
                        relevant = rescan = lost = True  # events were lost: list everything again
                    elif not ev.is_dir:
                        continue
                    elif layout.parse_pod_dir_name(ev.name) is not None:
                        relevant = True
                        pod_dir = ev.directory / ev.name
                        dirs.add(pod_dir)
                        if ev.mask & IN_CREATE:
                            self._watch(ino, pod_dir)
                        else:
                            self._unwatched.discard(pod_dir)
                    elif layout.parse_container_dir_name(ev.name) is not None:
                        relevant = True
                        dirs.add(ev.directory)
                if rescan:
                    added, found = self._watch_tiers(ino, all_pods=True)
                    relevant |= added or bool(found)
                    lost |= added
                    dirs |= found
                if relevant:
                    self.events += 1
                    self._report(None if lost else frozenset(dirs))
