"""The runtime-quota calculation (koord.scheduler.plugins.elasticquota.runtime) against figures worked out by
hand from Koordinator's algorithm (``runtime_quota_calculator.go``, ``scale_minquota_when_over_root_res.go``):
min first, the spare shared by weight with the largest remainders, never above a request, a quota that does
not lend keeping its min, mins scaled down when they exceed the total, and a tree of parents."""

from __future__ import annotations

from koord.scheduler.plugins.elasticquota.runtime import (
    Claim,
    QuotaInput,
    calculate,
    largest_remainder,
    scaled_mins,
    share_out,
)

ROOT = "koordinator-root-quota"


def q(
    name: str, parent: str = ROOT, *, lends: bool = True, weight: int | None = None, **cpu: int
) -> QuotaInput:
    """A quota in cpu only: ``min``, ``max`` (default 1000), ``req`` (its pods' requests)."""
    maximum = cpu.get("max", 1000)
    return QuotaInput(
        name,
        parent,
        min={"cpu": cpu.get("min", 0)},
        max={"cpu": maximum},
        weight={"cpu": maximum},
        lends=lends,
        own_request={"cpu": cpu["req"]} if "req" in cpu else {},
    )


def runtimes(quotas: list[QuotaInput], total: int, *, scale_min: bool = True) -> dict[str, int]:
    tree = {x.name: x for x in [QuotaInput(ROOT, ""), *quotas]}
    return {
        n: f.runtime["cpu"] for n, f in calculate(tree, ROOT, {"cpu": total}, scale_min=scale_min).items()
    }


# ---- one level -----------------------------------------------------------------------------------


def test_borrowing_min_first_then_the_spare_by_weight() -> None:
    # 100 to share. a: min 20, asks 80; b: min 30, asks 10 (lends 20); c: min 10, asks 60.
    # Mins first: a 20, b 10 (its request), c 10 -> 60 left, equal weights: 30 each -> a 50, c 40.
    claims = [Claim("a", 80, 20, 1), Claim("b", 10, 30, 1), Claim("c", 60, 10, 1)]
    assert share_out(100, claims) == {"a": 50, "b": 10, "c": 40}


def test_lending_off_keeps_the_whole_min() -> None:
    # b does not lend: it keeps 30 although it asks for 10 -> 40 left: a 40, c 30.
    claims = [Claim("a", 80, 20, 1), Claim("b", 10, 30, 1, lends=False), Claim("c", 60, 10, 1)]
    assert share_out(100, claims) == {"a": 40, "b": 30, "c": 30}


def test_weights_split_the_spare_in_proportion() -> None:
    # 60 left after mins; weights 3:1 -> a 45 more, c 15 more.
    claims = [Claim("a", 100, 20, 3), Claim("b", 10, 30, 1), Claim("c", 100, 10, 1)]
    assert share_out(100, claims) == {"a": 65, "b": 10, "c": 25}


def test_a_borrower_never_exceeds_its_request_and_gives_the_surplus_back() -> None:
    # 100 shared equally: a would get 50 but asks for 30; its 20 surplus goes to b: 70.
    assert share_out(100, [Claim("a", 30, 0, 1), Claim("b", 200, 0, 1)]) == {"a": 30, "b": 70}
    # Everybody satisfied: what is left stays unassigned.
    assert share_out(100, [Claim("a", 30, 0, 1), Claim("b", 20, 0, 1)]) == {"a": 30, "b": 20}


def test_largest_remainders_ties_go_to_the_smaller_name() -> None:
    # 10 / 3 = 3 rem 1 each: the one unit left goes to "a".
    three = [Claim("c", 0, 0, 1), Claim("a", 0, 0, 1), Claim("b", 0, 0, 1)]
    assert largest_remainder(10, three) == [3, 4, 3]
    # 7 by weights 5:2 -> 5 and 2 exactly; 8 -> 40/7=5 r5, 16/7=2 r2: the larger remainder wins the unit.
    assert largest_remainder(8, [Claim("x", 0, 0, 5), Claim("y", 0, 0, 2)]) == [6, 2]
    # A weight of zero gets nothing; no weight at all shares nothing.
    assert largest_remainder(10, [Claim("a", 0, 0, 0), Claim("b", 0, 0, 2)]) == [0, 10]
    assert largest_remainder(10, [Claim("a", 0, 0, 0)]) == [0]


def test_large_memory_figures_are_shared_exactly() -> None:
    # Bytes times weights (max in bytes) overflow a float's 53 bits; the split must still add up.
    gib = 2**30
    claims = [Claim(n, 10**6 * gib, 0, w * gib + 1) for n, w in (("a", 7), ("b", 11), ("c", 13))]
    got = share_out(1000 * gib + 7, claims)
    assert sum(got.values()) == 1000 * gib + 7


# ---- min scaling ---------------------------------------------------------------------------------


def test_mins_above_the_total_are_scaled_down_in_proportion() -> None:
    # mins 60 + 60 = 120 > 100: each scaled to int(100 * 60 / 120) = 50; memory fits and is left alone.
    mins = {"a": {"cpu": 60, "memory": 4}, "b": {"cpu": 60, "memory": 4}}
    assert scaled_mins({"cpu": 100, "memory": 10}, mins) == {
        "a": {"cpu": 50, "memory": 4},
        "b": {"cpu": 50, "memory": 4},
    }
    # int() truncates as Koordinator's float64 -> int64 does: 100 * 1 / 3 = 33.
    assert scaled_mins({"cpu": 100}, {"a": {"cpu": 1}, "b": {"cpu": 2}})["a"]["cpu"] == 1
    assert scaled_mins({"cpu": 2}, {"a": {"cpu": 1}, "b": {"cpu": 2}}) == {"a": {"cpu": 0}, "b": {"cpu": 1}}
    assert scaled_mins({"cpu": 0}, {"a": {"cpu": 1}}) == {"a": {"cpu": 0}}


def test_min_scaling_keeps_runtimes_within_the_total() -> None:
    both_busy = [q("a", min=60, req=100), q("b", min=60, req=100)]
    assert runtimes(both_busy, 100) == {"a": 50, "b": 50}
    # Without scaling each keeps its min: 120 handed out of 100.
    assert runtimes(both_busy, 100, scale_min=False) == {"a": 60, "b": 60}


def test_a_quota_that_does_not_lend_keeps_its_scaled_min() -> None:
    # a: min 60 asks 0 and does not lend; b: min 60 asks 100. Scaled mins 50/50: a keeps 50, b 50.
    assert runtimes([q("a", min=60, req=0, lends=False), q("b", min=60, req=100)], 100) == {"a": 50, "b": 50}
    # With room to spare a lending quota that asks for nothing gets nothing and b borrows all of it.
    assert runtimes([q("a", min=60, req=0), q("b", min=60, req=100)], 100) == {"a": 0, "b": 100}


# ---- the tree ------------------------------------------------------------------------------------


def tree(total: int) -> dict[str, int]:
    """root <- p (parent, min 60) <- c1 (min 40, asks 50), c2 (min 20, asks 40);
    root <- x (min 40, asks 70)."""
    return runtimes(
        [
            q("p", min=60, max=100),
            q("c1", "p", min=40, max=100, req=50),
            q("c2", "p", min=20, max=100, req=40),
            q("x", min=40, max=100, req=70),
        ],
        total,
    )


def test_a_tree_of_parents_shares_level_by_level() -> None:
    # p asks for 50 + 40 = 90. At 100: p starts at 60, x at 40, nothing left -> p 60, x 40.
    # Inside p (60): c1 40, c2 20 (their mins), nothing left.
    assert tree(100) == {"p": 60, "x": 40, "c1": 40, "c2": 20}
    # At 150: 50 left, weights 100:100 -> p 85, x 65 (both still below their requests).
    # Inside p (85): 25 left after mins, 12.5 each: the unit goes to c1 -> 53, capped at its 50, the
    # 3 over go to c2: 20 + 12 + 3 = 35.
    assert tree(150) == {"p": 85, "x": 65, "c1": 50, "c2": 35}


def test_a_parent_asks_for_its_childrens_requests_capped_at_each_max() -> None:
    quotas = {
        ROOT: QuotaInput(ROOT, ""),
        "p": q("p", min=0, max=70),
        "c1": q("c1", "p", max=30, req=50),  # asks 50, passes up 30
        "c2": q("c2", "p", min=25, max=100, req=10, lends=False),  # asks 10, raised to its min 25
    }
    figures = calculate(quotas, ROOT, {"cpu": 1000})
    assert figures["c1"].request == {"cpu": 50} and figures["c1"].limited_request == {"cpu": 30}
    assert figures["c2"].child_request == {"cpu": 10} and figures["c2"].request == {"cpu": 25}
    assert figures["p"].child_request == {"cpu": 55}
    assert figures["p"].limited_request == {"cpu": 55}
    assert figures["c1"].runtime == {"cpu": 30} and figures["c2"].runtime == {"cpu": 25}


def test_children_share_only_the_resources_of_their_parents_max() -> None:
    quotas = {
        ROOT: QuotaInput(ROOT, ""),
        "p": QuotaInput("p", ROOT, max={"cpu": 100}, weight={"cpu": 1}),
        "c": QuotaInput(
            "c", "p", max={"cpu": 100, "memory": 100}, weight={"cpu": 1, "memory": 1}, own_request={"cpu": 5}
        ),
    }
    figures = calculate(quotas, ROOT, {"cpu": 100, "memory": 100})
    assert figures["p"].runtime == {"cpu": 5, "memory": 0}
    assert figures["c"].runtime == {"cpu": 5}  # the parent shares no memory


def test_orphans_keep_at_most_their_min_and_cycles_are_left_out() -> None:
    quotas = {
        ROOT: QuotaInput(ROOT, ""),
        "o": q("o", "missing", min=5, req=10),
        "x": q("x", "y", min=5, req=10),
        "y": q("y", "x", min=5, req=10),
    }
    figures = calculate(quotas, ROOT, {"cpu": 100})
    assert figures["o"].runtime == {"cpu": 5}
    assert "x" not in figures and "y" not in figures
