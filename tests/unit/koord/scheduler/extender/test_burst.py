"""Why the extender binds: with the pod cache lagging (the API binding not yet seen), a burst sees stale
load unless each pod is recorded at /bind. Same 50 pods, same nodes, with and without /bind."""

from __future__ import annotations

from collections import Counter

from koordshared.testing.objects import pod
from tests.support.scheduler.extenderenv import ServedExtender


def burst(bind: bool) -> Counter[str]:
    e = ServedExtender()
    try:
        names = ["empty"] + [f"n-{i:02d}" for i in range(9)]
        for name in names:
            e.add_node(name)
            e.report(name, cpu_milli=0 if name == "empty" else 4800)  # the others at 30 %
        placed: Counter[str] = Counter()
        for i in range(50):
            p = pod(f"p-{i:02d}", uid=f"uid-{i}")  # BestEffort: estimated 250m / 200Mi
            _, res = e.post("filter", {"Pod": p, "NodeNames": names})
            _, scores = e.post("prioritize", {"Pod": p, "NodeNames": res["NodeNames"]})
            best = max(s["Score"] for s in scores)
            node = next(s["Host"] for s in scores if s["Score"] == best)  # ties: the first, as a tie-break
            if bind:
                _, ans = e.post(
                    "bind",
                    {
                        "PodName": p["metadata"]["name"],
                        "PodNamespace": "default",
                        "PodUID": p["metadata"]["uid"],
                        "Node": node,
                    },
                )
                assert ans == {"Error": ""}
            placed[node] += 1
        return placed
    finally:
        e.close()


def test_bind_spreads_a_burst_that_a_lagging_cache_would_pile_up() -> None:
    stale = burst(bind=False)
    assert stale == Counter({"empty": 50})  # every pod saw "empty" at 10
    spread = burst(bind=True)
    # Each /bind adds 250m to "empty" at once, so its score falls below the others' and they get pods
    # too; the threshold (65 % = 41 pods of 250m) is never what stops it.
    assert spread["empty"] < 41
    assert len(spread) >= 3
    assert sum(spread.values()) == 50
