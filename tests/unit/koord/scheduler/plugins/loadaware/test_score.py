"""LoadAware scores computed by hand from Koordinator's formula
(``pkg/scheduler/plugins/loadaware/load_aware.go``, ``Score``), the worked example included: ``leastUsed =
(cap - used)*100 // cap``, weighted, integer division, 0 without a fresh metric."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koord.scheduler.plugins.loadaware.args import Vec
from koord.scheduler.plugins.loadaware.estimator import estimate_pod
from koord.scheduler.plugins.loadaware.plugin import MAX_SCORE
from koordshared.apis.meta.quantity import to_milli
from koordshared.testing.objects import GiB, pod
from tests.support.scheduler.env import Env


def least_used(used: int, capacity: int) -> int:
    """Koordinator's ``leastUsedScore``: the free share of ``capacity`` in [0, 100]."""
    if capacity == 0 or used > capacity:
        return 0
    return (capacity - used) * MAX_SCORE // capacity


def load_aware_score(dominant: int, weights: Vec, used: Vec, capacity: Vec) -> int:
    """Koordinator's ``loadAwareSchedulingScorer`` written plainly, the reference the plugin's inlined
    loop is held to: every resource takes part in the dominant minimum, weighted or not; integer
    division throughout."""
    node_score = weight_sum = dominant_score = 0
    if dominant != 0:
        dominant_score, weight_sum = MAX_SCORE, dominant
    for i in (0, 1):
        s = least_used(used[i], capacity[i])
        node_score += s * weights[i]
        weight_sum += weights[i]
        dominant_score = min(dominant_score, s)
    node_score += dominant_score * dominant
    if weight_sum <= 0:
        return 0
    return node_score // weight_sum


PROD_2G = pod("in", requests={"cpu": "1", "memory": "2Gi"}, limits={"cpu": "1", "memory": "2Gi"})


def test_worked_example_scores_61() -> None:
    # cap 16000m / 64Gi; existing 6000m / 20Gi; incoming 850m / 1.4Gi (1 cpu x 85 %, 2Gi x 70 %)
    assert estimate_pod(PROD_2G, {"cpu": 85, "memory": 70}) == (850, 1503238554)
    env = Env()
    env.add_node("n")
    env.report("n", cpu_milli=6000, memory_bytes=20 * GiB)
    # cpu (16000-6850)*100//16000 = 57; memory (64Gi-20Gi-1503238554)*100//64Gi = 66; (57+66)//2 = 61
    assert least_used(6850, 16000) == 57
    assert least_used(20 * GiB + 1503238554, 64 * GiB) == 66
    assert env.score(PROD_2G, "n") == 61


def test_weights_and_dominant_resource() -> None:
    # leastUsed cpu 57, memory 66 (as above)
    assert load_aware_score(0, (3, 1), (6850, 20 * GiB + 1503238554), (16000, 64 * GiB)) == (3 * 57 + 66) // 4
    # D = 2: (57 + 66 + 2*min(57, 66)) // (1 + 1 + 2) = 237 // 4 = 59
    assert load_aware_score(2, (1, 1), (6850, 20 * GiB + 1503238554), (16000, 64 * GiB)) == 59
    # a resource with weight 0 still takes part in the dominant minimum
    assert load_aware_score(1, (0, 1), (15000, 0), (16000, 64 * GiB)) == (100 * 1 + 6 * 1) // 2
    # over capacity or no capacity scores 0 for that resource
    assert load_aware_score(0, (1, 1), (17000, 0), (16000, 64 * GiB)) == (0 + 100) // 2
    assert load_aware_score(0, (1, 1), (1000, 0), (0, 64 * GiB)) == (0 + 100) // 2


def test_dominant_weight_only_args() -> None:
    env = Env({"dominantResourceWeight": 1})
    env.add_node("n")
    env.report("n", cpu_milli=6000, memory_bytes=20 * GiB)
    # no resourceWeights given with D != 0: weights stay empty, score = min(57, 66)
    assert env.score(PROD_2G, "n") == 57


def test_no_metric_expired_or_empty_report_score_zero() -> None:
    env = Env()
    for name in ("none", "expired", "empty", "fresh"):
        env.add_node(name)
    env.report("expired", age=180, cpu_milli=1000)
    env.report("empty", with_node_metric=False)
    env.report("fresh", age=179, cpu_milli=1000)
    assert env.score(PROD_2G, "none") == 0
    assert env.score(PROD_2G, "expired") == 0
    assert env.score(PROD_2G, "empty") == 0
    assert env.score(PROD_2G, "fresh") > 0


def test_expired_scores_zero_even_when_the_filter_ignores_expiry() -> None:
    env = Env({"filterExpiredNodeMetrics": False, "nodeMetricExpirationSeconds": 300})
    env.add_node("n")
    env.report("n", age=301, cpu_milli=1000)
    assert env.filter(PROD_2G, "n") is None
    assert env.score(PROD_2G, "n") == 0


def test_score_according_prod_usage_uses_prod_sum() -> None:
    env = Env({"scoreAccordingProdUsage": True})
    env.add_node("n")
    # node busy with batch load (12 cores), prod pod p1 reports 2000m and is cached on the node
    env.pods.put(
        pod("p1", node_name="n", requests={"cpu": "2"}, limits={"cpu": "2"}, scheduled_at=env.now - 3600)
    )
    env.report("n", cpu_milli=12000, memory_bytes=0, pods=[("default", "p1", 2000, 0, "koord-prod")])
    # prod path: existing = prod usage 2000 (+ no delta: reported and old) + incoming 850
    # cpu (16000-2850)*100//16000 = 82; memory: 0 existing + 1503238554 -> (64Gi-1.4Gi)*100//64Gi = 97
    assert env.score(PROD_2G, "n") == (82 + 97) // 2
    be = pod("be")
    # a BestEffort (batch) pod is scored on the node usage: 12000 + 250 -> 23; 200Mi -> 99
    assert env.score(be, "n") == (least_used(12250, 16000) + least_used(200 * 2**20, 64 * GiB)) // 2


def test_score_aggregation_type() -> None:
    env = Env({"aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "10m"}})
    env.add_node("n")
    env.report("n", cpu_milli=1000, aggregated={("p95", "10m0s"): (8000, 0), ("p95", "5m0s"): (4000, 0)})
    be = pod("be")
    # p95 over 10m: 8000 + 250 -> (16000-8250)*100//16000 = 48; memory 200Mi -> 99
    assert env.score(be, "n") == (48 + 99) // 2


@settings(max_examples=60, deadline=None)
@given(
    cpu_used=st.integers(0, 40000),
    mem_used=st.integers(0, 80 * GiB),
    cpu_cap=st.sampled_from(["0", "1", "16", "31500m"]),
    w_cpu=st.integers(0, 5),
    w_mem=st.integers(0, 5),
    dominant=st.integers(0, 5),
)
def test_batch_scores_equal_the_reference_formula(
    cpu_used: int, mem_used: int, cpu_cap: str, w_cpu: int, w_mem: int, dominant: int
) -> None:
    weights = {k: v for k, v in (("cpu", w_cpu), ("memory", w_mem)) if v}
    if not weights and not dominant:
        return  # Koordinator's defaulting would bring back cpu 1 / memory 1
    env = Env(
        {"resourceWeights": weights, "dominantResourceWeight": dominant}
        if weights
        else {"dominantResourceWeight": dominant}
    )
    env.add_node("n", cpu=cpu_cap)
    env.report("n", cpu_milli=cpu_used, memory_bytes=mem_used)
    be = pod("be")  # + 250m / 200Mi
    cap = (to_milli(cpu_cap), 64 * GiB)
    want = load_aware_score(dominant, (w_cpu, w_mem), (cpu_used + 250, mem_used + 200 * 2**20), cap)
    assert env.score(be, "n") == want
