"""The ``slo-controller-config`` ConfigMap as the controllers see it: parsed, last good kept.

koord-manager's two caches in one: the colocation config (NodeMetric and batch resources) and the NodeSLO
keys. :meth:`SLOConfigCache.sync` takes the ConfigMap (``None`` when it does not exist) on create and on
every change of ``data``; a ConfigMap delete is ignored (the last config stays in force), as in
Koordinator. For the colocation key: missing ConfigMap at first load -> defaults in *error status* (the
NodeMetric controller then keeps existing specs); empty key -> defaults; bad JSON or an invalid cluster
strategy -> the last good config stays, error status, and a Warning Event on the ConfigMap. For each
NodeSLO key: missing -> its default; malformed -> its last good value stays and a Warning Event. The
callbacks fire only when the parsed result changed, to re-enqueue every node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from koordshared.apis.configuration import slocontroller as sloconfig
from koordshared.apis.configuration.slocontroller import (
    COLOCATION_CONFIG_KEY,
    ColocationConfig,
    InvalidConfig,
    parse_colocation_config,
)
from koordshared.apis.meta.groups import CONFIG_MAPS
from koordshared.kube.objectref import ObjectRef

log = logging.getLogger(__name__)

REASON_COLOCATION_UNMARSHAL_FAILED = "ColocationCfgUnmarshalFailed"
REASON_SLO_UNMARSHAL_FAILED = "SLOCfgUnmarshalFailed"


class Recorder(Protocol):
    """What the cache needs of an Event recorder (:class:`koordshared.kube.events.EventRecorder`)."""

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None: ...


class SLOConfigCache:
    def __init__(
        self,
        *,
        recorder: Recorder | None = None,
        on_colocation_change: Callable[[], None] = lambda: None,
        on_nodeslo_change: Callable[[], None] = lambda: None,
        on_refused: Callable[[str], None] = lambda _key: None,
    ) -> None:
        self._lock = threading.Lock()
        self._recorder = recorder
        self._on_colocation_change = on_colocation_change
        self._on_nodeslo_change = on_nodeslo_change
        self._on_refused = on_refused
        self._colocation = ColocationConfig()
        self._error = False
        self._available = False
        self._slo: dict[str, sloconfig.KeyConfig] = {
            k: sloconfig.default_key_config(k) for k in sloconfig.NODESLO_CONFIG_KEYS
        }
        self._data: Mapping[str, Any] | None = None

    # ---- what the controllers read -----------------------------------------------------------------

    @property
    def available(self) -> bool:
        """A first sync happened (the ConfigMap informer has listed)."""
        with self._lock:
            return self._available

    @property
    def colocation(self) -> ColocationConfig:
        with self._lock:
            return self._colocation

    @property
    def colocation_error(self) -> bool:
        """The last colocation sync failed (or the ConfigMap was missing at first load)."""
        with self._lock:
            return self._error

    def nodeslo_configs(self) -> dict[str, sloconfig.KeyConfig]:
        with self._lock:
            return dict(self._slo)

    # ---- updates ----------------------------------------------------------------------------------------

    def _warn(self, cm: Mapping[str, Any], key: str, reason: str, err: Exception) -> None:
        log.warning("slo-controller-config %s refused, keeping the last good one: %s", key, str(err))
        self._on_refused(key)
        if self._recorder is not None:
            self._recorder.event(
                ObjectRef.of(cm, CONFIG_MAPS),
                "Warning",
                reason,
                f"failed to parse {key}, keeping the last good config: {err}",
            )

    def sync(self, cm: Mapping[str, Any] | None) -> None:
        """Apply the ConfigMap (``None``: missing at first load; later deletes are not passed here)."""
        data = (cm or {}).get("data") or {}
        data = data if isinstance(data, Mapping) else {}
        with self._lock:
            first = not self._available
            if not first and cm is not None and data == self._data:
                return  # only .data matters, as Koordinator's update filter
            self._data = dict(data)
        colocation_changed = self._sync_colocation(cm, data, first)
        slo_changed = self._sync_nodeslo(cm, data) if cm is not None else False
        with self._lock:
            self._available = True
        if colocation_changed or first:
            self._on_colocation_change()
        if slo_changed or first:
            self._on_nodeslo_change()

    def _sync_colocation(self, cm: Mapping[str, Any] | None, data: Mapping[str, Any], first: bool) -> bool:
        new: ColocationConfig | None
        error = False
        if cm is None:
            new, error = ColocationConfig(), first
        else:
            text = data.get(COLOCATION_CONFIG_KEY)
            if not text:
                new = ColocationConfig()
            else:
                try:
                    new = parse_colocation_config(str(text))
                except InvalidConfig as err:
                    self._warn(cm, COLOCATION_CONFIG_KEY, REASON_COLOCATION_UNMARSHAL_FAILED, err)
                    new, error = None, True
                else:
                    for warning in new.warnings:
                        log.warning("slo-controller-config %s: %s", COLOCATION_CONFIG_KEY, warning)
        with self._lock:
            self._error = error
            if new is None or new == self._colocation:
                return False
            self._colocation = new
        log.info("colocation config changed: %s", new.cluster)
        return True

    def _sync_nodeslo(self, cm: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        changed = False
        for key in sloconfig.NODESLO_CONFIG_KEYS:
            text = data.get(key)
            if text is None:
                new = sloconfig.default_key_config(key)
            else:
                try:
                    new = sloconfig.parse_key(key, str(text))
                except InvalidConfig as err:
                    self._warn(cm, key, REASON_SLO_UNMARSHAL_FAILED, err)
                    continue
            with self._lock:
                if new != self._slo[key]:
                    self._slo[key] = new
                    changed = True
        return changed
