"""Work queue: dedup, no concurrent processing of one key, re-queue on done, rate-limited retries, delays."""

from __future__ import annotations

import sys
import threading
import time

from koordlet.testing import wait_until
from koordshared.kube.workqueue import WorkQueue


def blocked_in_get(t: threading.Thread) -> bool:
    """``t`` is waiting inside ``WorkQueue.get`` on the queue's condition (not merely about to call it):
    the state a wake-up must reach. Read from the thread's live stack, so the test never guesses."""
    frame = sys._current_frames().get(t.ident or -1)
    names = []
    while frame is not None:
        names.append((frame.f_code.co_name, frame.f_code.co_filename))
        frame = frame.f_back
    return bool(names) and names[0][0] == "wait" and ("get", WorkQueue.get.__code__.co_filename) in names


def test_dedup_and_fifo() -> None:
    q = WorkQueue()
    q.add_all(["a", "b", "a", "c", "b"])
    assert len(q) == 3
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", "c"]
    assert q.get(timeout=0.01) is None


def test_key_added_while_processing_comes_back_after_done_only() -> None:
    q = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a")
    assert q.get(timeout=0.02) is None  # not handed to a second worker while the first holds it
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(timeout=0.01) is None


def test_rate_limited_retries_back_off_per_key_and_forget_resets() -> None:
    q = WorkQueue(base_delay=0.02, max_delay=0.05)
    delays = [q.add_rate_limited("a") for _ in range(4)]
    assert delays == [0.02, 0.04, 0.05, 0.05] and q.num_requeues("a") == 4
    t0 = time.monotonic()
    assert q.get(timeout=1) == "a"  # the four retries collapse into one pending key
    assert time.monotonic() - t0 >= 0.015
    q.done("a")
    q.forget("a")
    assert q.num_requeues("a") == 0 and q.add_rate_limited("a") == 0.02


def test_delayed_key_wakes_a_blocked_worker() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=2)), name="test-wq-worker")
    t.start()
    assert wait_until(lambda: blocked_in_get(t), 5)
    t0 = time.monotonic()
    q.add_after("late", 0.1)
    t.join(3)
    assert got == ["late"] and 0.08 <= time.monotonic() - t0 < 1.0


def test_shut_down_releases_workers() -> None:
    q = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get()), name="test-wq-shutdown")
    t.start()
    assert wait_until(lambda: blocked_in_get(t), 5)
    q.shut_down()
    t.join(2)
    assert got == [None] and not t.is_alive()
    q.add("x")
    assert q.get(0) is None
