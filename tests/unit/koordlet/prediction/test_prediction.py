"""Peak prediction: Koordinator's histogram arithmetic, the prod-reclaimable formulas,
training from the metric cache, checkpoints. Expected values are worked out from Koordinator's formulas:
bucket ``i`` of an exponential histogram starts at ``first * (1.05^i - 1) / 0.05`` and a percentile is
the start of the bucket after the one where the cumulative weight reaches it."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.prediction.checkpoint import Checkpointer
from koordlet.prediction.histogram import CPU_BUCKETS, DecayingHistogram
from koordlet.prediction.predictor import PredictionUnavailable, ProdReclaimablePredictor
from koordlet.prediction.server import NODE_UID, PeakPredictServer, PredictionConfig, node_item_uid
from koordlet.testing import FakeClock, FakeStates, make_node, make_pod
from koordshared.apis.slo.nodemetric import Usage

GI = 1 << 30
DAY = 86400.0


def edge(first: float, value: float) -> float:
    """Koordinator's percentile of samples all equal to ``value``: the end of its bucket."""
    bucket = int(math.log(value * 0.05 / first + 1) / math.log(1.05)) if value >= first else 0
    return first * (1.05 ** (bucket + 1) - 1) / 0.05


def test_bucket_layout_and_percentile_of_one_value() -> None:
    # ceil(log_1.05(1024 * 0.05 / 0.025 + 1)) + 1 = ceil(156.3) + 1 = 158 buckets of CPU
    assert CPU_BUCKETS.num_buckets == 158
    # 1 core: log_1.05(1 * 0.05 / 0.025 + 1) = log_1.05(3) = 22.5 -> bucket 22, which ends at
    # 0.025 * (1.05^23 - 1) / 0.05 = 1.0357 cores
    h = DecayingHistogram(CPU_BUCKETS, 12 * 3600)
    for i in range(10):
        h.add_sample(1.0, 1.0, 1_000_000.0 + i)
    assert h.percentile(0.95) == pytest.approx(1.03576, abs=1e-4)
    assert h.percentile(0.0) == pytest.approx(1.03576, abs=1e-4)
    assert DecayingHistogram(CPU_BUCKETS, 3600).percentile(0.9) == 0.0  # empty


def test_newer_samples_weigh_more() -> None:
    # 0.1 core at t, 2 cores one half-life later: weights 1 and 2 (total 3). p30 (threshold 0.9) is in the
    # old bucket, p50 (1.5) in the new one: a plain histogram would give the old value up to p50.
    h = DecayingHistogram(CPU_BUCKETS, 3600)
    h.add_sample(0.1, 1.0, 7200.0)
    h.add_sample(2.0, 1.0, 7200.0 + 3600)
    assert h.percentile(0.3) == pytest.approx(edge(0.025, 0.1))
    assert h.percentile(0.5) == pytest.approx(edge(0.025, 2.0))


def server(tmp_path: Path | None = None, **cfg: object) -> tuple[PeakPredictServer, FakeStates, FakeClock]:
    clock = FakeClock(start=100.0, wall_start=1_767_225_600.0)
    states = FakeStates(make_node(8000, 16 * GI), (), None)
    cache = MetricCache(clock=clock, wall_clock=clock.wall)
    config = PredictionConfig(**cfg)  # type: ignore[arg-type]
    ckpt = Checkpointer(tmp_path) if tmp_path is not None else None
    return PeakPredictServer(config, cache, states, clock.wall, ckpt), states, clock


def prod_pod(name: str, cpu: int, mem: int, age: float) -> api.PodInfo:
    pod = make_pod(name, api.QOSClass.LS, cpu_request_milli=cpu, memory_request_bytes=mem)
    return dataclasses.replace(pod, priority_class=api.PriorityClass.PROD, created_at=1_767_225_600.0 - age)


def train_items(s: PeakPredictServer, sys: tuple[float, float], prod: tuple[float, float]) -> None:
    s.update(node_item_uid("sys"), *sys)
    s.update(node_item_uid("koord-prod"), *prod)
    s.update(node_item_uid(""), 0.0, 0.0)


def test_prod_reclaimable_from_pod_and_priority_predictors() -> None:
    s, _, clock = server(safety_margin_percent=10)
    old = prod_pod("old", 4000, 8 * GI, age=2 * DAY)
    young = prod_pod("young", 1000, 2 * GI, age=3600)  # cold start: its request is its peak
    s.update(old.uid, 1.0, 2 * GI)
    train_items(s, sys=(0.5, 1 * GI), prod=(1.0, 2 * GI))
    p = ProdReclaimablePredictor(
        s,
        make_node(8000, 16 * GI, cpu_allocatable_milli=8000, memory_allocatable_bytes=16 * GI),
        clock.wall(),
    )
    p.add_pod(old)
    p.add_pod(young)
    cpu1, mem2 = edge(0.025, 1.0), edge(5 << 20, 2 * GI)  # p95 of 1 core, p98 of 2 GiB
    peak_old = Usage(int(int(cpu1 * 1000) * 1.1), int(int(mem2) * 1.1))
    by_pod = Usage(
        min(8000 - peak_old.cpu_milli, 4000 - peak_old.cpu_milli),
        min(16 * GI - peak_old.memory_bytes, 8 * GI - peak_old.memory_bytes),
    )
    # priority: (sys + prod + none) p95/p98 * 1.1; requests of both pods (the young one included)
    unrec = Usage(
        int((int(edge(0.025, 0.5) * 1000) + int(cpu1 * 1000) + 0) * 1.1),
        int((int(edge(5 << 20, GI)) + int(mem2)) * 1.1),
    )
    by_priority = Usage(
        min(8000 - unrec.cpu_milli, 5000 - unrec.cpu_milli),
        min(16 * GI - unrec.memory_bytes, 10 * GI - unrec.memory_bytes),
    )
    assert p.result() == Usage(
        min(by_pod.cpu_milli, by_priority.cpu_milli), min(by_pod.memory_bytes, by_priority.memory_bytes)
    )
    peak_by_pod = peak_old + Usage(1000, 2 * GI)
    assert p.peak() == Usage(
        max(peak_by_pod.cpu_milli, unrec.cpu_milli), max(peak_by_pod.memory_bytes, unrec.memory_bytes)
    )


def test_no_models_yet_means_no_result() -> None:
    s, _, clock = server()
    p = ProdReclaimablePredictor(s, make_node(8000, 16 * GI), clock.wall())
    p.add_pod(prod_pod("old", 4000, 8 * GI, age=2 * DAY))  # no model: counted as unpredicted
    with pytest.raises(PredictionUnavailable):
        p.result()
    with pytest.raises(PredictionUnavailable):
        ProdReclaimablePredictor(s, None, clock.wall()).result()


def test_training_feeds_p90_of_the_last_interval(tmp_path: Path) -> None:
    s, states, clock = server(tmp_path, training_interval=60.0)
    pod = prod_pod("web", 2000, 4 * GI, age=2 * DAY)
    batch = dataclasses.replace(make_pod("batch", api.QOSClass.BE), priority_class=api.PriorityClass.BATCH)
    states.pod_list = [pod, batch]
    cache = s._cache
    for i in range(60):
        cache.append(api.POD_CPU_USAGE, {"pod_uid": pod.uid}, 1.0 if i < 50 else 3.0)
        cache.append(api.POD_MEMORY_USAGE, {"pod_uid": pod.uid}, 2 * GI)
        cache.append(api.POD_CPU_USAGE, {"pod_uid": batch.uid}, 0.5)
        cache.append(api.POD_MEMORY_USAGE, {"pod_uid": batch.uid}, GI)
        cache.append(api.NODE_CPU_USAGE, None, 4.0)
        cache.append(api.NODE_MEMORY_USAGE, None, 5 * GI)
        clock.advance(1)
    s.train()
    # p90 of the pod's 60 CPU samples (50 x 1, 10 x 3): index int(60 * 0.9) - 1 = 53 -> 3 cores
    web = s.prediction(pod.uid)
    assert web is not None and web.values["max"][0] == int(edge(0.025, 3.0) * 1000)
    prod, batch_item = s.prediction(node_item_uid("koord-prod")), s.prediction(node_item_uid("koord-batch"))
    assert prod is not None and prod.values["p90"] == web.values["p90"]
    assert batch_item is not None and batch_item.values["p90"][0] == int(edge(0.025, 0.5) * 1000)
    assert s.prediction(node_item_uid("koord-mid")) is not None  # no pod of the class: trained with 0
    sys = s.prediction(node_item_uid("sys"))  # node 4 - pods (3 + 0.5) = 0.5 core; 5 - 3 GiB = 2 GiB
    assert sys is not None and sys.values["p95"] == (int(edge(0.025, 0.5) * 1000), int(edge(5 << 20, 2 * GI)))
    assert s.prediction(NODE_UID) is not None

    clock.advance(601)  # checkpoint interval passed: saved; a new server restores what the pods still need
    s.checkpoint()
    files = {p.name for p in tmp_path.iterdir()}
    assert pod.uid in files and NODE_UID in files and batch.uid in files
    again, states2, _ = server(tmp_path)
    states2.pod_list = [pod]
    assert again.restore() == len(files) - 1  # the batch pod is gone: its checkpoint too
    assert batch.uid not in {p.name for p in tmp_path.iterdir()}
    assert again.prediction(pod.uid) == s.prediction(pod.uid)


def test_koordinators_checkpoint_files_are_read(tmp_path: Path) -> None:
    # A checkpoint as koordlet writes it: one bucket (22, where 1 core falls) at full weight.
    doc = {
        "UID": NODE_UID,
        "CPU": {
            "referenceTimestamp": "2026-01-01T00:00:00Z",
            "bucketWeights": {"22": 10000},
            "totalWeight": 5.0,
        },
        "Memory": {"bucketWeights": {}, "totalWeight": 0},
        "LastUpdated": "2026-01-01T00:00:00Z",
    }
    (tmp_path / NODE_UID).write_text(json.dumps(doc))
    (tmp_path / "garbage").write_text("{")
    s, _, _ = server(tmp_path)
    assert s.restore() == 1
    got = s.prediction(NODE_UID)
    assert got is not None and got.values["p95"][0] == int(edge(0.025, 1.0) * 1000)
    assert not (tmp_path / "garbage").exists()  # an unknown or unreadable checkpoint is removed
