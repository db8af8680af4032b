"""History is stored in typed arrays: about 16 bytes per sample, not boxed Python floats."""

from __future__ import annotations

import gc
import tracemalloc

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.testing import FakeClock

CONTAINERS = 1000
PODS = 2000
SAMPLES = 300


def test_per_sample_bytes_stay_near_two_doubles() -> None:
    clock = FakeClock()
    containers = [f"containerd://{i:064x}" for i in range(CONTAINERS)]
    pods = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(PODS)]
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        cache = MetricCache(clock=clock)
        for _ in range(SAMPLES):
            cache.append_batch(api.CONTAINER_CPU_USAGE, [(c, 0.25) for c in containers])
            cache.append_batch(api.POD_MEMORY_USAGE, [(p, 1.5e9) for p in pods])
            clock.advance(1)
        gc.collect()
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    samples = (CONTAINERS + PODS) * SAMPLES
    assert cache.stats().samples == samples
    per_sample = (used - base) / samples
    # Two doubles are 16 bytes; array over-allocation (~6 %) and per-series objects (labels, two array
    # headers) add a little. Boxed floats in lists would cost ~2 x (24 + 8) = 64 bytes per sample.
    assert 16.0 <= per_sample < 21.0, per_sample
