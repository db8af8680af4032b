"""``SystemConfig``: kernel memory and scheduler tunables from NodeSLO ``systemStrategy`` (Koordinator's
``pkg/koordlet/qosmanager/plugins/sysreconcile/system_config.go``).

Every ``reconcile-interval-seconds`` (the agent's flag, 1 s):

* ``minFreeKbytesFactor`` -> ``vm.min_free_kbytes = memory capacity in KiB * factor / 10000``;
* ``watermarkScaleFactor`` -> ``vm.watermark_scale_factor``;
* ``memcgReapBackGround``, ``schedGroupIdentityEnabled``, ``schedIdleSaverWmark``,
  ``pageCacheLimitEnabled`` -> their Anolis/Alibaba files (unsupported, and skipped, elsewhere);
* ``schedFeatures`` ``{NAME: true|false}`` -> ``NAME`` / ``NO_NAME`` in ``sched_features``.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from koordlet import api
from qosplugins._refusals import Refusals

MIN_FREE_KBYTES = "min_free_kbytes"
SCHED_FEATURES = "sched_features"
_PLAIN: Mapping[str, str] = {
    # api.SystemStrategy field -> tunable (koordlet's SystemResource name)
    "watermark_scale_factor": "watermark_scale_factor",
    "memcg_reap_back_ground": "memcg_reap_background",
    "sched_group_identity_enabled": "sched_group_identity_enabled",
    "sched_idle_saver_wmark": "sched_idle_saver_wmark",
    "page_cache_limit_enabled": "pagecache_limit_enabled",
}


def wanted(slo: api.NodeSLO, node: api.NodeInfo | None) -> list[tuple[str, str]]:
    """``(tunable, value)`` pairs the strategy asks for, in a stable order."""
    strategy = slo.system
    out: list[tuple[str, str]] = []
    factor = strategy.min_free_kbytes_factor
    if factor is not None and node is not None and node.memory_capacity_bytes > 0:
        out.append((MIN_FREE_KBYTES, str(node.memory_capacity_bytes // 1024 * factor // 10000)))
    for field, name in _PLAIN.items():
        value = getattr(strategy, field)
        if value is not None:
            out.append((name, str(value)))
    for feature, on in sorted(strategy.sched_features.items()):
        out.append((SCHED_FEATURES, feature if on else f"NO_{feature}"))
    return out


class SystemConfig(api.QOSPluginBase):
    """Keeps ``systemStrategy``'s tunables written; puts the kernel's values back when they leave it."""

    name = "SystemConfig"
    feature = api.FeatureSpec(default=False, stage=api.Stage.ALPHA)

    def setup(self, ctx: api.PluginContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._owned: set[str] = set()
        """Tunables this plugin has written and not yet restored."""
        self._refusals = Refusals(ctx)

    def run(self, stop: threading.Event) -> None:
        self.ctx.every(self.ctx.agent.reconcile_interval, self.reconcile)

    def reconcile(self) -> None:
        with self._lock:
            pairs = wanted(self.ctx.states.node_slo(), self.ctx.states.node())
            names = {name for name, _ in pairs}
            gone = sorted(self._owned - names)
            if gone:
                self._refusals.report(self.ctx.executor.restore_sysctl(self.name, gone))
                self._owned -= set(gone)
            results = [
                self.ctx.executor.update_sysctl(name, value, owner=self.name, reason="systemStrategy")
                for name, value in pairs
            ]
            self._owned |= {r.update.resource for r in results if r.ok and r.skipped != "unsupported"}
            self._refusals.report(results)

    def shutdown(self) -> None:
        with self._lock:
            self._refusals.report(self.ctx.executor.restore_sysctl(self.name))
            self._owned.clear()
            self.ctx.executor.release(self.name)
