"""Inotify's wake-up eventfd: a wake that comes after ``close`` (a component's shutdown racing its
reader thread's exit) writes nothing, even when the descriptor numbers went to other files."""

from __future__ import annotations

import os
import threading

from koordlet.system.inotify import Inotify


def test_a_wake_after_close_writes_to_no_reused_descriptor() -> None:
    ino = Inotify()
    ino.close()
    pipes = [os.pipe() for _ in range(4)]  # the lowest free numbers: those close released
    try:
        for _r, w in pipes:
            os.set_blocking(w, False)
        for r, _w in pipes:
            os.set_blocking(r, False)
        ino.wake()
        leaked = []
        for r, _w in pipes:
            try:
                leaked.append(os.read(r, 64))
            except BlockingIOError:
                pass
        assert leaked == [], "wake() wrote to a descriptor close() had released"
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


def test_wake_ends_a_long_read_in_another_thread() -> None:
    with Inotify() as ino:
        got: list[object] = []
        reader = threading.Thread(target=lambda: got.append(ino.read(30.0)))
        reader.start()
        ino.wake()
        reader.join(5)
        assert not reader.is_alive() and got == [[]]
