"""The peak predict server (Koordinator's ``peakPredictServer``): one model per pod and per node item.

Every training interval (1 min) it feeds each model the p90 of the last interval's usage from the metric
cache: each pod (by UID), the node (``__node__``), each priority class summed over its pods
(``__node-koord-prod__`` ... and ``__node-__`` for no class; 0 when no pod of that class ran) and the
system, node minus all pods (``__node-sys__``). A model is a pair of decaying histograms (CPU in cores,
half-life 12 h; memory in bytes, 24 h) answering p60/p90/p95/p98/max. Models not updated for 30 min are
dropped; every minute up to 12 models whose last checkpoint is older than 10 min are written, so a
restart resumes where it stopped (:mod:`koordlet.prediction.checkpoint`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from koordlet import api
from koordlet.metriccache import MetricCache
from koordlet.prediction.checkpoint import Checkpointer, ModelCheckpoint
from koordlet.prediction.histogram import CPU_BUCKETS, MEMORY_BUCKETS, DecayingHistogram

log = logging.getLogger(__name__)

NODE_UID = "__node__"
SYSTEM_ITEM = "sys"
PRIORITY_CLASSES = tuple(api.PriorityClass)
PERCENTILES: Mapping[str, float] = {"p60": 0.6, "p90": 0.9, "p95": 0.95, "p98": 0.98, "max": 1.0}


def node_item_uid(item: str) -> str:
    """``__node-<item>__``: a priority class's (``koord-prod``; ``""`` for none) or the system's model."""
    return f"__node-{item}__"


@dataclass(frozen=True, slots=True)
class PredictionConfig:
    """koordlet's ``--prediction-*`` flags (seconds where Go takes a duration)."""

    checkpoint_path: str = "/prediction-checkpoints"
    cold_start_seconds: float = 24 * 3600.0
    safety_margin_percent: int = 10
    memory_half_life: float = 24 * 3600.0
    cpu_half_life: float = 12 * 3600.0
    training_interval: float = 60.0
    model_expiration: float = 30 * 60.0
    checkpoint_interval: float = 10 * 60.0
    checkpoint_max_per_step: int = 12


@dataclass
class Model:
    cpu: DecayingHistogram
    memory: DecayingHistogram
    last_updated: float = 0.0
    last_checkpointed: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True, slots=True)
class Prediction:
    """Each percentile of a model as (CPU millicores, memory bytes), truncated as Koordinator's int64."""

    values: Mapping[str, tuple[int, int]]


class PeakPredictServer:
    """Trains and answers the peak models; the daemon schedules :meth:`train`, :meth:`gc` and
    :meth:`checkpoint`."""

    def __init__(
        self,
        config: PredictionConfig,
        cache: MetricCache,
        states: api.StatesReader,
        wall_clock: Callable[[], float],
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self.config = config
        self._cache = cache
        self._states = states
        self._wall = wall_clock
        self._checkpointer = checkpointer
        self._models: dict[str, Model] = {}
        self._lock = threading.Lock()
        self.synced = False

    def _new_model(self) -> Model:
        c = self.config
        return Model(
            DecayingHistogram(CPU_BUCKETS, c.cpu_half_life),
            DecayingHistogram(MEMORY_BUCKETS, c.memory_half_life),
        )

    def _p90(self, metric: str, labels: Mapping[str, str] | None = None) -> float | None:
        got = self._cache.aggregate(
            metric, window=self.config.training_interval, aggs=("p90",), labels=labels
        )
        return None if got is None else got.values["p90"]

    def update(self, uid: str, cpu: float, memory: float) -> None:
        now = self._wall()
        with self._lock:
            model = self._models.get(uid)
            if model is None:
                model = self._models[uid] = self._new_model()
        with model.lock:
            model.last_updated = now
            model.cpu.add_sample(cpu, 1.0, now)
            model.memory.add_sample(memory, 1.0, now)

    def train(self) -> None:
        """One training step (``training``): pods, node, priority classes, system."""
        by_class: dict[str, tuple[float, float]] = {}
        all_cpu = all_mem = 0.0
        any_pod = False
        for pod in self._states.pods():
            labels = {"pod_uid": pod.uid}
            cpu, mem = self._p90(api.POD_CPU_USAGE, labels), self._p90(api.POD_MEMORY_USAGE, labels)
            if cpu is None or mem is None:
                continue  # no samples in the interval: the pod's model is left as it is
            self.update(pod.uid, cpu, mem)
            c, m = by_class.get(pod.priority_class.value, (0.0, 0.0))
            by_class[pod.priority_class.value] = (c + cpu, m + mem)
            all_cpu, all_mem, any_pod = all_cpu + cpu, all_mem + mem, True
        node_cpu, node_mem = self._p90(api.NODE_CPU_USAGE), self._p90(api.NODE_MEMORY_USAGE)
        if node_cpu is not None and node_mem is not None:
            self.update(NODE_UID, node_cpu, node_mem)
        for cls in PRIORITY_CLASSES:
            self.update(node_item_uid(cls.value), *by_class.get(cls.value, (0.0, 0.0)))
        sys_cpu, sys_mem = node_cpu or 0.0, node_mem or 0.0
        if any_pod:
            sys_cpu, sys_mem = max(sys_cpu - all_cpu, 0.0), max(sys_mem - all_mem, 0.0)
        self.update(node_item_uid(SYSTEM_ITEM), sys_cpu, sys_mem)
        self.synced = True

    def prediction(self, uid: str) -> Prediction | None:
        """The model's percentiles, ``None`` for a UID without a model (not trained yet, or gone)."""
        with self._lock:
            model = self._models.get(uid)
        if model is None:
            return None
        with model.lock:
            return Prediction(
                {
                    name: (int(model.cpu.percentile(p) * 1000.0), int(model.memory.percentile(p)))
                    for name, p in PERCENTILES.items()
                }
            )

    def gc(self) -> None:
        """Drop models not updated within the expiration (and their checkpoints)."""
        if not self.synced:
            return
        now = self._wall()
        with self._lock:
            gone = [u for u, m in self._models.items() if now - m.last_updated > self.config.model_expiration]
            for uid in gone:
                del self._models[uid]
        for uid in gone:
            if self._checkpointer is not None:
                self._checkpointer.remove(uid)

    def checkpoint(self) -> None:
        """Write the models checkpointed longest ago, at most ``checkpoint_max_per_step``."""
        if not self.synced or self._checkpointer is None:
            return
        now = self._wall()
        with self._lock:
            pairs = sorted(self._models.items(), key=lambda kv: kv[1].last_checkpointed)
        for uid, model in pairs[: self.config.checkpoint_max_per_step]:
            if now - model.last_checkpointed < self.config.checkpoint_interval:
                break
            with model.lock:
                ckpt = ModelCheckpoint(uid, model.cpu.checkpoint(), model.memory.checkpoint(), now)
            self._checkpointer.save(ckpt)
            model.last_checkpointed = now

    def restore(self) -> int:
        """Load the checkpoints of known UIDs (the pods now, the node and its items); remove the others."""
        if self._checkpointer is None:
            return 0
        known = {p.uid for p in self._states.pods()} | {NODE_UID, node_item_uid(SYSTEM_ITEM)}
        known |= {node_item_uid(c.value) for c in PRIORITY_CLASSES}
        restored = 0
        for ckpt in self._checkpointer.restore():
            if ckpt is None or ckpt.uid not in known:
                continue
            model = self._new_model()
            model.last_updated = ckpt.last_updated
            try:
                model.cpu.load(ckpt.cpu)
                model.memory.load(ckpt.memory)
            except (ValueError, TypeError) as err:
                log.warning("prediction: ignoring checkpoint of %s: %s", ckpt.uid, err)
                continue
            with self._lock:
                self._models[ckpt.uid] = model
            restored += 1
        for uid in self._checkpointer.stored() - known:
            self._checkpointer.remove(uid)
        return restored
