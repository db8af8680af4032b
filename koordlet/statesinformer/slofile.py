"""Standalone NodeSLO from ``--node-slo-file``: a NodeSLO object or just its spec, YAML or JSON,
re-read when its mtime, size or content changes. A missing file means Koordinator's defaults."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from koordlet.statesinformer.nodeslo import NodeSLOStore

log = logging.getLogger(__name__)
MAX_BYTES = 1024 * 1024
_MISSING = "missing"


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
