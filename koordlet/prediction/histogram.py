"""Decaying exponential histograms (Koordinator's ``pkg/util/histogram``, itself the VPA recommender's).

Bucket ``i`` starts at ``first * (ratio^i - 1) / (ratio - 1)``; a sample's weight is multiplied by
``2^((t - reference) / half_life)``, so old samples count less relative to new ones; the reference moves
(rescaling every weight) once samples run 100 half-lives past it. A percentile is the *end* of the bucket
where the cumulative weight reaches it. :meth:`DecayingHistogram.checkpoint` keeps the weights scaled to
at most 10000 per bucket, in the JSON shape Koordinator writes (``referenceTimestamp``, ``bucketWeights``,
``totalWeight``), so its checkpoint files can be read back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.quantity import format_time, parse_time

MAX_CHECKPOINT_WEIGHT = 10000
MAX_DECAY_EXPONENT = 100
EPSILON = 0.001 * 0.1
"""Koordinator's ``epsilon = 0.001 * MinSampleWeight``: lighter buckets count as empty."""


@dataclass(frozen=True, slots=True)
class ExponentialBuckets:
    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float = EPSILON

    @property
    def num_buckets(self) -> int:
        ratio = self.ratio
        return math.ceil(math.log(self.max_value * (ratio - 1) / self.first_bucket_size + 1, ratio)) + 1

    def find_bucket(self, value: float) -> int:
        if value < self.first_bucket_size:
            return 0
        ratio = self.ratio
        bucket = int(math.log(value * (ratio - 1) / self.first_bucket_size + 1) / math.log(ratio))
        return min(bucket, self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio**bucket - 1) / (self.ratio - 1)


CPU_BUCKETS = ExponentialBuckets(1024.0, 0.025, 1.05)
"""Cores: up to 1024, first bucket 25m, each 5 % wider."""
MEMORY_BUCKETS = ExponentialBuckets(float(1 << 41), float(5 << 20), 1.05)
"""Bytes: up to 2 TiB, first bucket 5 MiB."""


class DecayingHistogram:
    """A histogram whose samples lose half their weight every ``half_life`` seconds (relative to new ones)."""

    def __init__(self, buckets: ExponentialBuckets, half_life: float) -> None:
        self.buckets = buckets
        self.half_life = half_life
        self._n = buckets.num_buckets
        self.weights = [0.0] * self._n
        self.total = 0.0
        self.min_bucket = self._n - 1
        self.max_bucket = 0
        self.reference: float | None = None
        """Seconds since the epoch, a multiple of the half-life (Go's ``Time.Round``)."""

    def is_empty(self) -> bool:
        return self.weights[self.min_bucket] < self.buckets.epsilon

    def add_sample(self, value: float, weight: float, at: float) -> None:
        bucket = self.buckets.find_bucket(value)
        w = weight * self._decay_factor(at)
        self.weights[bucket] += w
        self.total += w
        if bucket < self.min_bucket and self.weights[bucket] >= self.buckets.epsilon:
            self.min_bucket = bucket
        if bucket > self.max_bucket and self.weights[bucket] >= self.buckets.epsilon:
            self.max_bucket = bucket

    def percentile(self, p: float) -> float:
        if self.is_empty():
            return 0.0
        threshold = p * self.total
        partial = 0.0
        bucket = self.min_bucket
        while bucket < self.max_bucket:
            partial += self.weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self._n - 1:
            return self.buckets.bucket_start(bucket + 1)
        return self.buckets.bucket_start(bucket)

    def _decay_factor(self, at: float) -> float:
        if self.reference is None or at > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift_reference(at)
        assert self.reference is not None
        return float(2 ** ((at - self.reference) / self.half_life))

    def _shift_reference(self, at: float) -> None:
        new = math.floor(at / self.half_life + 0.5) * self.half_life
        if self.reference is not None:
            self._scale(2.0 ** math.floor((self.reference - new) / self.half_life + 0.5))
        self.reference = new

    def _scale(self, factor: float) -> None:
        for b in range(self.min_bucket, self.max_bucket + 1):
            self.weights[b] *= factor
        self.total *= factor
        eps, last = self.buckets.epsilon, self._n - 1
        while self.weights[self.min_bucket] < eps and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < eps and self.max_bucket > 0:
            self.max_bucket -= 1

    def checkpoint(self) -> dict[str, Any]:
        """Koordinator's ``HistogramCheckpoint``: weights scaled so the heaviest bucket is 10000."""
        top = max(self.weights[self.min_bucket : self.max_bucket + 1], default=0.0)
        weights: dict[str, int] = {}
        if top > 0:
            for b in range(self.min_bucket, self.max_bucket + 1):
                w = math.floor(self.weights[b] * MAX_CHECKPOINT_WEIGHT / top + 0.5)
                if w > 0:
                    weights[str(b)] = w
        out: dict[str, Any] = {"bucketWeights": weights, "totalWeight": self.total}
        if self.reference is not None:
            out["referenceTimestamp"] = format_time(self.reference)
        return out

    def load(self, doc: Any) -> None:
        """Add a checkpoint's weights (``ValueError`` for a malformed one, nothing added)."""
        if not isinstance(doc, dict):
            raise ValueError("histogram checkpoint is not an object")
        total = float(doc.get("totalWeight") or 0.0)
        raw = doc.get("bucketWeights") or {}
        if not math.isfinite(total) or total < 0 or not isinstance(raw, dict):
            raise ValueError("histogram checkpoint has a negative or infinite weight or no bucket map")
        # Koordinator's bucket weights are uint32: anything else (Infinity, NaN, negative, fractional, a
        # string) is a file that was not written by a histogram (found by fuzzing: Infinity raised
        # OverflowError out of the restore).
        if not all(_is_uint32(v) for v in raw.values()):
            raise ValueError("histogram checkpoint has a bucket weight that is not a 32-bit count")
        weights = {int(k): int(v) for k, v in raw.items()}
        if any(b < 0 or b >= self._n for b in weights):
            raise ValueError("histogram checkpoint has buckets out of range")
        ref = parse_time(doc.get("referenceTimestamp"))
        if ref is not None:
            self.reference = ref
        s = sum(weights.values())
        if s == 0:
            return
        for b, w in weights.items():
            self.min_bucket, self.max_bucket = min(self.min_bucket, b), max(self.max_bucket, b)
            self.weights[b] += w * total / s
        self.total += total


def _is_uint32(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return math.isfinite(v) and v == int(v) and 0 <= v < 2**32
