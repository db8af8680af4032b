"""``bench/scheduler.py``'s memory step runs its code in a child process built from a string, which no
import check sees: a moved helper broke it unnoticed. Run it small."""

from __future__ import annotations

from bench.scheduler import memory


def test_the_memory_step_runs_and_counts_every_pod() -> None:
    res = memory(10, 50)  # the step itself checks that the cache holds every pod
    assert res["rss_mib_10_nodes_0k_pods"] >= res["rss_floor_mib"] > 0
    assert res["kib_per_pod"] > 0
