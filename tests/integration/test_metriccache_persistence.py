"""A real crash: an agent process checkpointing every second is SIGKILLed; a new cache loads its history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from koordlet import api
from koordlet.metriccache import MetricCache, MetricCacheConfig
from koordlet.metriccache.checkpoint import FILE_NAME
from tests.support.paths import ROOT

PODS = 20
RUN_SECONDS = 4.0

WRITER = textwrap.dedent(
    f"""
    import sys, threading
    from pathlib import Path
    from koordlet.metriccache import MetricCache, MetricCacheConfig

    cache = MetricCache(MetricCacheConfig(tsdb_path=Path(sys.argv[1]), checkpoint_interval=1.0))
    stop = threading.Event()
    cache.run(stop)
    pods = [f"pod-{{p}}" for p in range({PODS})]
    i = 0
    while True:
        cache.append("node_cpu_usage", None, float(i))
        cache.append_batch("pod_cpu_usage", [(p, float(i)) for p in pods])
        print(i, flush=True)
        i += 1
        stop.wait(0.005)
    """
)


def test_history_survives_sigkill(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        appended = 0
        for line in proc.stdout:
            appended = int(line) + 1
            if time.monotonic() - started >= RUN_SECONDS:
                break
        killed_at = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        appended = max([appended, *(int(line) + 1 for line in proc.stdout)])
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    assert (tmp_path / FILE_NAME).exists()
    cache = MetricCache(MetricCacheConfig(tsdb_path=tmp_path))
    assert cache.load() == 1 + PODS
    assert cache.stats().load_errors == 0
    node = cache.aggregate(api.NODE_CPU_USAGE, window=300, aggs=("avg", "count", "last"))
    assert node is not None
    rate = appended / (killed_at - started)
    # The last checkpoint started at most ~1 s (its interval) plus one checkpoint's duration before the kill.
    assert appended - 2.5 * rate <= node.count <= appended
    # The file holds a prefix of what was written: values 0..count-1, in order.
    assert node["last"] == node.count - 1
    assert node["avg"] == (node.count - 1) / 2
    for p in range(PODS):
        pod = cache.aggregate(api.POD_CPU_USAGE, window=300, aggs=("count",), labels={"pod_uid": f"pod-{p}"})
        assert pod is not None and pod.count in (node.count - 1, node.count)
    # The restored cache goes on checkpointing over the same file.
    stop = threading.Event()
    stop.set()
    cache.run(stop).join(timeout=10)
    assert MetricCache(MetricCacheConfig(tsdb_path=tmp_path)).load() == 1 + PODS
