"""Pod lifecycle event generator: inotify on the kubepods tier dirs triggers early pod refreshes.

koordlet watches ``<cgroup root>/cpu/<tier>`` (v1; the unified tree on v2) for the three tiers, since
kubelet creates and removes a pod's cgroup dir there before and after the pod runs. Pod dirs are watched
too, so container dirs appearing (standalone discovery needs their IDs) also trigger a refresh. Tier dirs
that do not exist yet are retried on every wake-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from koordlet import api
from koordlet.system.cgroups import cgroup_dir_path
from koordlet.system.host import Host
from koordlet.system.inotify import IN_CREATE, IN_DELETE, Inotify

log = logging.getLogger(__name__)

_TIERS = (api.KubeQOSClass.GUARANTEED, api.KubeQOSClass.BURSTABLE, api.KubeQOSClass.BESTEFFORT)
MAX_WATCHES = 4096
"""Bound on pod-dir watches (the kernel default ``max_user_watches`` is far higher, but stay modest)."""


class PLEG:
    """Calls ``on_event()`` after a burst of pod/container dir creations or removals."""

    def __init__(self, host: Host, on_event: Callable[[], object], poll: float = 0.5) -> None:
        self.host = host
        self.on_event = on_event
        self.poll = poll
        self.events = 0
        self._reported: set[Path] = set()

    def _tier_paths(self) -> list[Path]:
        return [
            cgroup_dir_path(self.host.paths, self.host.mode, "cpu", self.host.layout.qos_dir(q))
            for q in _TIERS
        ]

    def _watch(self, ino: Inotify, path: Path) -> None:
        if path in ino.watched or len(ino.watched) >= MAX_WATCHES:
            return
        try:
            ino.add_watch(path, IN_CREATE | IN_DELETE)
        except OSError as err:
            if path not in self._reported:  # retried every poll; say it once
                self._reported.add(path)
                log.debug("pleg: cannot watch %s yet: %s", path, str(err))

    def _watch_all(self, ino: Inotify) -> None:
        layout = self.host.layout
        for tier in self._tier_paths():
            self._watch(ino, tier)
            if not tier.is_dir():
                continue
            try:
                names = [e.name for e in tier.iterdir() if e.is_dir()]
            except OSError:
                continue
            for name in names:
                if layout.parse_pod_dir_name(name) is not None:
                    self._watch(ino, tier / name)

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: wait for events (``poll`` seconds at a time) and report them."""
        with Inotify() as ino:
            self._watch_all(ino)
            # Dirs made between the informer's first list and these watches raised no event: one refresh
            # now closes that gap (as an informer lists again once its watch is up).
            self.on_event()
            while not stop.is_set():
                batch = ino.read(self.poll)
                if not batch:
                    self._watch_all(ino)  # tiers created after we started
                    continue
                layout = self.host.layout
                relevant = False
                for ev in batch:
                    if ev.overflow:
                        relevant = True
                    elif ev.is_dir and (
                        layout.parse_pod_dir_name(ev.name) is not None
                        or layout.parse_container_dir_name(ev.name) is not None
                    ):
                        relevant = True
                        if ev.mask & IN_CREATE and layout.parse_pod_dir_name(ev.name) is not None:
                            self._watch(ino, ev.directory / ev.name)
                if relevant:
                    self.events += 1
                    self.on_event()
