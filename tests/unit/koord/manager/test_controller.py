"""The controller loop's decisions: retries with backoff, forget on success, later looks, leadership."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from koord.manager.controller import Controller, NotLeader, Writer
from koord.manager.metrics import ManagerMetrics


def test_failures_back_off_success_forgets_and_not_leader_requeues_plainly() -> None:
    outcomes: list[object] = [RuntimeError("boom"), RuntimeError("boom"), None, NotLeader("lost"), 5.0]

    def reconcile(key: str) -> float | None:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out  # type: ignore[return-value]

    metrics = ManagerMetrics(CollectorRegistry())
    ctl = Controller("t", reconcile, metrics)
    q = ctl.queue
    ctl.process_one("n1")
    ctl.process_one("n1")
    assert q.num_requeues("n1") == 2
    ctl.process_one("n1")
    assert q.num_requeues("n1") == 0  # forgotten after a success
    ctl.process_one("n1")  # NotLeader: back in the queue at once, not counted as a failure
    assert q.num_requeues("n1") == 0 and q.get(timeout=1) == "n1"
    q.done("n1")
    while q.get(timeout=0.05) is not None:  # the two retries scheduled above come due
        pass
    ctl.process_one("n2")  # asks for a look in 5 s: queued for later, not now
    assert q.get(timeout=0.1) is None
    reg = metrics.registry
    assert reg.get_sample_value("koord_manager_reconciles_total", {"controller": "t", "result": "error"}) == 2
    assert (
        reg.get_sample_value("koord_manager_reconciles_total", {"controller": "t", "result": "not_leader"})
        == 1
    )


def test_writer_refuses_to_send_without_leadership() -> None:
    class NoClient:
        def __getattr__(self, name: str) -> object:
            raise AssertionError("nothing may be sent")

    w = Writer(NoClient(), "t", ManagerMetrics(CollectorRegistry()), lambda: False, 1.0)
    with pytest.raises(NotLeader):
        w.send("create", "POST", "/x", {})
