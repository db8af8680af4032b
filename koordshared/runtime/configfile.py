"""Reading a ``--config`` file, for the agent and every cluster process: YAML (JSON is YAML too), with one
wording of what went wrong. What the document must hold is each reader's own business."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from koordshared.runtime.errors import ConfigError


def read_config_file(path: str | Path) -> Any:
    """The parsed document at ``path`` (``None`` for an empty file); :class:`ConfigError` naming the flag
    and the file when it cannot be read or is not YAML."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(f"--config {path}: not UTF-8 text: {err.reason}") from err
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"--config {path}: not valid YAML: {err}") from err
