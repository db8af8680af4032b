"""Runs the plugins' controllers (Koordinator's ``frameworkext`` ControllersMap): each controller gets a
work queue (dedup, per-key retry backoff, delayed keys) and its ``workers`` threads, which reconcile only
while this replica leads (a follower's keys wait for it to lead)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from koord.kube.workqueue import WorkQueue
from koord.scheduler.framework.extension import Controller
from koord.scheduler.framework.runtime import Framework

log = logging.getLogger(__name__)


class ControllerRunner:
    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.queue = WorkQueue(controller.name, base_delay=0.05, max_delay=60.0)
        controller.bind(self.queue.add)

    def work(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        """One worker: take keys and reconcile them until ``stop``."""
        while not stop.is_set():
            if not is_leader():
                stop.wait(0.1)
                continue
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            self.process(key)

    def process(self, key: str) -> None:
        try:
            again = self.controller.reconcile(key)
        except Exception as err:
            delay = self.queue.add_rate_limited(key)
            log.warning(
                "controller %s: %s failed (%s); retry in %.2fs", self.controller.name, key, err, delay
            )
        else:
            self.queue.forget(key)
            if again is not None:
                self.queue.add_after(key, again)
        finally:
            self.queue.done(key)

    def stop(self) -> None:
        self.queue.shut_down()


def runners(frameworks: Iterable[Framework]) -> list[ControllerRunner]:
    """One runner per controller of the profiles' plugins (a plugin shared by profiles counts once)."""
    seen: dict[int, ControllerRunner] = {}
    for fw in frameworks:
        for c in fw.extensions.controllers:
            if id(c) not in seen:
                seen[id(c)] = ControllerRunner(c)
    return list(seen.values())
