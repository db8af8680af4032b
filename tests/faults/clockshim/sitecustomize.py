"""Test-only wall-clock steps for an agent child process (``PYTHONPATH`` = this directory).

``time.time`` returns the real time plus the seconds written in ``$KOORDLET_TEST_CLOCK_FILE``, re-read
every 20 ms, so a test can step the agent's wall clock by hours without touching the machine's clock.
The monotonic clock is left alone, as a real wall-clock step leaves it.
"""

from __future__ import annotations

import os
import threading
import time

_PATH = os.environ.get("KOORDLET_TEST_CLOCK_FILE", "")

if _PATH:
    _real_time = time.time
    _offset = [0.0]

    def _shifted() -> float:
        return _real_time() + _offset[0]

    def _follow() -> None:
        while True:
            try:
                with open(_PATH, encoding="utf-8") as f:
                    _offset[0] = float(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    time.time = _shifted
    threading.Thread(target=_follow, name="test-clock-shim", daemon=True).start()
