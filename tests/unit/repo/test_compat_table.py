"""The README's compatibility table names every koordlet gate, metric and flag: a
gate, metric or flag added to the agent's tables without a line in the README fails here."""

from __future__ import annotations

import re

import qosplugins
from koordlet import compatflags, config, featuregates, metricdefs
from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text()
SECTION = README.split("## Compatibility with Koordinator's koordlet")[1].split("\n## ")[0]


def rows(title: str) -> str:
    return SECTION.split(f"**{title}**")[1].split("\n**")[0]


def test_every_gate_has_a_row() -> None:
    gates = featuregates.koordlet_gates({p.name: p.feature for p in qosplugins.BUILTIN})
    table = rows("Feature gates")
    missing = [g for g in gates.known() if f"`{g}`" not in table]
    assert missing == []


def test_every_koordlet_metric_has_a_row() -> None:
    table = rows("Metrics")
    assert [d.name for d in metricdefs.KOORDLET_METRICS if f"`{d.name}`" not in table] == []


def test_every_koordlet_flag_is_in_a_flag_group() -> None:
    table = rows("Flags")
    named = set(re.findall(r"`-{1,2}([a-z0-9_-]+)", table))
    prefixes = [n.rstrip("*").rstrip("-") for n in re.findall(r"`--([a-z0-9-]+\*)`", table)]
    plugin_flags = {
        "cpu-suppress-interval-seconds",
        "cpu-evict-interval-seconds",
        "cpu-evict-cool-time-seconds",
        "memory-evict-interval-seconds",
        "memory-evict-cool-time-seconds",
    }
    koordlet_flags = set(compatflags.NOT_IMPLEMENTED) | {f.name for f in config.AGENT_FLAGS} | plugin_flags
    ours_only = {
        "node-name",
        "standalone",
        "kubeconfig",
        "dry-run",
        "cgroup-root",
        "cgroup-driver",
        "fast-sample-interval",
        "fast-sample-own-cpu",
        "pod-list",
        "node-slo-file",
        "log-format",
        "node-metric-report-min-interval",  # koordlet hard-codes this 30 s floor; here it is a flag
    }
    groups = ("runtime endpoints", "HAMi", "pod-resources", "XPU", "CPI, cold page", "node info/storage")
    for flag in sorted(koordlet_flags - ours_only):
        covered = flag in named or any(flag.startswith(p) for p in prefixes)
        covered = covered or (any(g in table for g in groups) and flag in _grouped())
        assert covered, f"--{flag} has no row in the README's flag table"


def _grouped() -> set[str]:
    """Flags the table names by group rather than one by one."""
    return {
        "containerd-endpoint",
        "docker-endpoint",
        "pouch-endpoint",
        "default-runtime-type",
        "hami-core-library-directory-path",
        "pod-resources-proxy-path",
        "xpu-device-infos-dir",
        "cpi-collector-interval",
        "collect-cpi-timewindow",
        "coldpage-collector-interval",
        "enable-pagecache-collector",
        "enable-resctrl-collector",
        "resctrl-collector-interval",
        "collect-node-cpu-info-interval",
        "collect-node-storage-info-interval",
        "tsdb-retention-duration",
        "tsdb-enable-prometheus-metric",
        "tsdb-stripe-size",
        "tsdb-wal-segment-size",
        "tsdb-max-block-chunk-segment-size",
        "tsdb-min-block-duration",
        "tsdb-max-block-duration",
        "tsdb-head-chunks-write-buffer-size",
    }
