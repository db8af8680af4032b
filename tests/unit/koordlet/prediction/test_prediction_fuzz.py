"""Prediction checkpoints, fuzzed: the agent reads ``/prediction-checkpoints`` from the host (Koordinator's
files when it replaces koordlet), so any content is restored or skipped, never raised, and a restored
model predicts finite, non-negative values."""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet.metriccache import MetricCache
from koordlet.prediction.checkpoint import Checkpointer
from koordlet.prediction.server import NODE_UID, PeakPredictServer, PredictionConfig
from koordlet.testing import FakeClock, FakeStates, make_node
from tests.support.strategies import json_values, mutations, text_mutations

GOOD: dict[str, Any] = {
    "UID": NODE_UID,
    "CPU": {
        "referenceTimestamp": "2026-01-01T00:00:00Z",
        "bucketWeights": {"22": 10000, "30": 4000},
        "totalWeight": 5.0,
    },
    "Memory": {
        "referenceTimestamp": "2026-01-01T00:00:00Z",
        "bucketWeights": {"10": 10000},
        "totalWeight": 2,
    },
    "LastUpdated": "2026-01-01T00:00:00Z",
}
# JSON as Python writes and reads it: Infinity, -Infinity and NaN are valid to json.loads.
ODD_NUMBERS = st.sampled_from([math.inf, -math.inf, math.nan, -1, -10000, 10**30, 0, 1e308])


@st.composite
def odd_weights(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(GOOD)
    side = draw(st.sampled_from(["CPU", "Memory"]))
    key = draw(st.sampled_from(["bucketWeights", "totalWeight"]))
    if key == "totalWeight":
        doc[side][key] = draw(ODD_NUMBERS)
    else:
        doc[side][key] = {
            draw(st.sampled_from(["22", "-1", "157", "100000", "x", "\u00b2"])): draw(ODD_NUMBERS)
        }
    return doc


def restore(text: str) -> PeakPredictServer:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / NODE_UID).write_text(text, encoding="utf-8")
        clock = FakeClock(start=100.0, wall_start=1_767_225_600.0)
        cache = MetricCache(clock=clock, wall_clock=clock.wall)
        s = PeakPredictServer(
            PredictionConfig(),
            cache,
            FakeStates(make_node(8000, 16 << 30), (), None),
            clock.wall,
            Checkpointer(Path(tmp)),
        )
        assert s.restore() in (0, 1)
    return s


def finite_or_none(s: PeakPredictServer) -> None:
    got = s.prediction(NODE_UID)
    if got is None:
        return
    for values in got.values.values():
        for v in values:
            assert math.isfinite(v) and v >= 0, got


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(odd_weights() | mutations(GOOD) | json_values)
def test_any_checkpoint_document_is_restored_or_skipped(doc: Any) -> None:
    try:
        text = json.dumps(doc)
    except ValueError:  # a float the encoder refuses: nothing to write
        return
    finite_or_none(restore(text))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_mutations(json.dumps(GOOD, indent=1)))
def test_a_broken_checkpoint_file_is_skipped(text: str) -> None:
    finite_or_none(restore(text))
