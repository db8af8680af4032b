"""Standalone NodeSLO from ``--node-slo-file``: a NodeSLO object or just its spec, YAML or JSON,
re-read when its mtime, size or content changes. A missing file means Koordinator's defaults.

:meth:`NodeSLOFile.run` looks at the file when inotify reports a change in its directory (a write, a
rename, a ConfigMap's symlink swap), not on a timer: polling it every two seconds was a standalone
agent's wake-ups with nothing to do. Without a watch (no such directory yet) it polls."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from koordlet.statesinformer.nodeslo import NodeSLOStore
from koordlet.system.inotify import IN_CREATE, IN_DELETE, Inotify, InotifyEvent, open_or_fallback

log = logging.getLogger(__name__)
MAX_BYTES = 1024 * 1024
_MISSING = "missing"
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
_SETTLED = IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE
"""Events after which the directory's files are whole: a writer closed one, or one was renamed, removed
or retouched. A file being written (``IN_CREATE``, ``IN_MODIFY``) is read once its writer closes it."""
WATCHED_RECHECK = 300.0
"""Seconds between two looks at a watched file with no event (a file system that reports nothing)."""


def spec_of(doc: Any) -> Any:
    """The spec of a NodeSLO object (recognised by ``kind``, ``apiVersion`` or a ``spec`` key), or ``doc``
    itself when it already is a spec."""
    if isinstance(doc, Mapping) and ("kind" in doc or "apiVersion" in doc or "spec" in doc):
        return doc.get("spec")
    return doc


class NodeSLOFile:
    """Feeds ``store`` from a file; :meth:`check` is the unit of work."""

    def __init__(self, path: str, store: NodeSLOStore) -> None:
        self.path = Path(path) if path else None
        self.store = store
        self._seen: str | None = None
        self._ino: Inotify | None = None
        self._lock = threading.Lock()
        self.wakeups = 0
        """Times :meth:`run` woke (an event, a poll, a recheck or :meth:`close`)."""

    def run(self, stop: threading.Event, poll: float) -> None:
        """Until ``stop``: :meth:`check` on every change inotify reports in the file's directory, every
        ``poll`` seconds while that directory cannot be watched, every :data:`WATCHED_RECHECK` else.
        Without a file there is nothing to look at: it returns at once."""
        if self.path is None:
            return
        directory = self.path.parent
        ino = open_or_fallback(log, "NodeSLO file", f"polling {self.path} every {poll:.0f} s")
        if ino is None:
            while not stop.wait(poll):
                self._look()
                self.wakeups += 1
            return
        with ino:
            with self._lock:
                self._ino = ino
            try:
                look = True
                while not stop.is_set():
                    if directory not in ino.watched:
                        try:
                            ino.add_watch(directory, _SETTLED | IN_CREATE)
                        except OSError as err:
                            log.debug("NodeSLO file: cannot watch %s yet: %s", directory, str(err))
                    if look:  # after the watch is up: a change in between is not lost
                        self._look()
                    batch = ino.read(WATCHED_RECHECK if directory in ino.watched else poll)
                    self.wakeups += 1
                    look = not batch or any(_settles(ev) for ev in batch)
            finally:
                with self._lock:
                    self._ino = None

    def _look(self) -> None:
        try:
            self.check()
        except Exception:  # an unreadable file: the next change or poll tries again
            log.exception("NodeSLO file %s: check failed", self.path)

    def close(self) -> None:
        """Wake :meth:`run` to see its stop Event (the informer's shutdown, after stop is set)."""
        with self._lock:
            if self._ino is not None:
                self._ino.wake()

    def _fingerprint(self) -> tuple[str, bytes | None]:
        if self.path is None:
            return _MISSING, None
        try:
            st = self.path.stat()
            data = self.path.read_bytes()[:MAX_BYTES]
        except FileNotFoundError:
            return _MISSING, None
        return f"{st.st_mtime_ns}:{st.st_size}:{hashlib.sha256(data).hexdigest()}", data

    def check(self) -> bool:
        """Apply the file if it changed since the last check; True when something was applied."""
        fingerprint, data = self._fingerprint()
        if fingerprint == self._seen:
            return False
        self._seen = fingerprint
        if data is None:
            if self.path is not None:
                log.info("NodeSLO file %s absent: defaults", self.path)
            self.store.apply(None)
            return True
        try:
            doc = yaml.safe_load(data.decode())  # JSON is YAML too
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            self.store.apply(f"<unparsable {self.path}: {err}>")  # refused: last good kept, reported
            return True
        self.store.apply(spec_of(doc))
        return True


def _settles(ev: InotifyEvent) -> bool:
    """Whether the directory may now hold a new whole file: see :data:`_SETTLED`; a symlink made in place
    (``ln -sf``) is whole when created."""
    if ev.overflow or ev.mask & _SETTLED:
        return True
    return bool(ev.mask & IN_CREATE) and (ev.directory / ev.name).is_symlink()
