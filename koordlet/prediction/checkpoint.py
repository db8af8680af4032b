"""Prediction model checkpoints: one JSON file per model UID, written to a temporary file then renamed.

The document is Koordinator's ``ModelCheckpoint`` (``UID``, ``CPU``, ``Memory``, ``LastUpdated``) so the
``/prediction-checkpoints`` directory its DaemonSet mounts from the host carries the models over when this
agent replaces koordlet. A file that does not parse is skipped (and removed with the unknown ones).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koordlet.system import atomicfile
from koordshared.apis.meta.quantity import format_time, parse_time

log = logging.getLogger(__name__)
TMP_MARK = ".tmp"
"""Koordinator's temporary files end in ``.tmp``, ours (``atomicfile``) in ``.tmp.<pid>``."""


@dataclass(frozen=True, slots=True)
class ModelCheckpoint:
    uid: str
    cpu: Any
    memory: Any
    last_updated: float


class Checkpointer:
    """Model checkpoints in a directory (created on first save)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _file(self, uid: str) -> Path:
        if not uid or "/" in uid or uid.startswith("."):
            raise ValueError(f"not a model UID: {uid!r}")
        return self.path / uid

    def save(self, ckpt: ModelCheckpoint) -> None:
        doc = {
            "UID": ckpt.uid,
            "CPU": ckpt.cpu,
            "Memory": ckpt.memory,
            "LastUpdated": format_time(ckpt.last_updated),
        }
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            atomicfile.write_atomic(self._file(ckpt.uid), [json.dumps(doc).encode()])
        except (OSError, ValueError) as err:
            log.warning("prediction: cannot checkpoint %s: %s", ckpt.uid, err)

    def remove(self, uid: str) -> None:
        try:
            os.unlink(self._file(uid))
        except (OSError, ValueError):
            pass  # already gone

    def stored(self) -> set[str]:
        try:
            return {p.name for p in self.path.iterdir() if p.is_file() and TMP_MARK not in p.name}
        except OSError:
            return set()

    def restore(self) -> list[ModelCheckpoint | None]:
        """Every checkpoint (``None`` for a file that does not parse); leftover temporary files go."""
        out: list[ModelCheckpoint | None] = []
        try:
            files = sorted(self.path.iterdir())
        except OSError:
            return out
        for f in files:
            if TMP_MARK in f.name:
                f.unlink(missing_ok=True)
                continue
            try:
                doc = json.loads(f.read_text(encoding="utf-8"))
                out.append(
                    ModelCheckpoint(
                        str(doc["UID"]), doc["CPU"], doc["Memory"], parse_time(doc.get("LastUpdated")) or 0.0
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                out.append(None)
        return out
