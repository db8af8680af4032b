"""Children started as from a terminal, where Ctrl-C reaches them.

A suite started in the background (``make test &``, ``nohup``) runs with SIGINT ignored, and an ignored
signal stays ignored across exec: the child Python then installs no KeyboardInterrupt handler and a test
of its Ctrl-C path would hang. A handled signal is reset to its default at exec, so the parent holds a
handler while it spawns."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_reaches_children() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
