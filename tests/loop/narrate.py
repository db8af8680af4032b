"""Which lines of the components' logs the loop tells its reader as they come: koord-scheduler's
placements and failures, the descheduler's decisions, the agents' errors."""

from __future__ import annotations

import re

from tests.loop import configs

LOG_PREFIX = re.compile(r"^[IWE]\d{4} [\d:.]+ \S+ \S+\] ")
ASSIGNED = re.compile(r"Successfully assigned (\S+) to (\S+)")
NARRATED = (
    "not evicting",
    "abnormal",
    "in a row",
    "would evict",
    "evicted ",
    "eviction of",
    "under its",
    "held back",
    "became leader",
)
"""Words of the descheduler's log lines that say what it decided."""


def strip_prefix(line: str) -> str:
    """The message of a klog-formatted line."""
    return LOG_PREFIX.sub("", line)


def narration(name: str, line: str) -> str | None:
    """What to tell of component ``name``'s log ``line``, or None to stay quiet."""
    text = strip_prefix(line)
    if name == configs.SCHEDULER:
        if m := ASSIGNED.search(text):
            return f"{m.group(1)} -> {m.group(2)}"
        if "unable to schedule" in text or "became leader" in text:
            return text
    elif name.startswith("koord-descheduler"):
        if any(k in text for k in NARRATED):
            return text
    elif ("Traceback" in line or line.startswith("E")) and "koordlet-" in name:
        return text
    return None
