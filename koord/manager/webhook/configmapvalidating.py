"""The ``slo-controller-config`` validation (Koordinator's ``webhook/cm/plugins/sloconfig``), with its
messages: each key that changed must parse (``ParseConfigFail``); the colocation config's node strategies
need a node selector, and its values Koordinator's ranges (``ConfigParamInvalid``, in go-playground
validator's words keyed by the Go field). Errors read as Koordinator's ``JsonFormatError``
(``___{"reason":...,"message":...}___``). Go's JSON decoder errors are worded by Python's here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]
COLOCATION = "colocation-config"
PARSE_NAMES = {
    COLOCATION: "colocation",
    "resource-threshold-config": "resourceThreshold",
    "resource-qos-config": "ResourceQOS",
    "cpu-burst-config": "CpuBurst",
    "system-config": "System",
}
"""The config keys Koordinator checks and how its parse message names each."""

RULES: Mapping[str, tuple[str, str, float | None, float | None, bool]] = {
    # json name: (Go field, type, min, max, min exclusive)
    "metricAggregateDurationSeconds": ("MetricAggregateDurationSeconds", "int", 1, None, False),
    "metricReportIntervalSeconds": ("MetricReportIntervalSeconds", "int", 1, None, False),
    "cpuReclaimThresholdPercent": ("CPUReclaimThresholdPercent", "int", 0, None, False),
    "memoryReclaimThresholdPercent": ("MemoryReclaimThresholdPercent", "int", 0, None, False),
    "degradeTimeMinutes": ("DegradeTimeMinutes", "int", 1, None, False),
    "updateTimeThresholdSeconds": ("UpdateTimeThresholdSeconds", "int", 1, None, False),
    "resourceDiffThreshold": ("ResourceDiffThreshold", "float", 0, 1, True),
    "midCPUThresholdPercent": ("MidCPUThresholdPercent", "int", 0, 100, False),
    "midMemoryThresholdPercent": ("MidMemoryThresholdPercent", "int", 0, 100, False),
    "midUnallocatedPercent": ("MidUnallocatedPercent", "int", 0, 100, False),
    "midStaticCPUReservedPercent": ("MidStaticCPUReservedPercent", "int", 0, 100, False),
    "midStaticMemoryReservedPercent": ("MidStaticMemoryReservedPercent", "int", 0, 100, False),
    "batchCPUThresholdPercent": ("BatchCPUThresholdPercent", "int", 0, None, False),
    "batchMemoryThresholdPercent": ("BatchMemoryThresholdPercent", "int", 0, None, False),
}
"""``ColocationStrategy``'s ``validate`` tags (v1.8)."""


class Refused(ValueError):
    """The ConfigMap is refused; ``str()`` is Koordinator's message."""


def json_error(reason: str, message: Any) -> str:
    """``JsonFormatError.Error()``: Go's ``json.Marshal`` (keys sorted, ``<>&`` escaped) between ``___``."""
    text = json.dumps({"reason": reason, "message": message}, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"___{text}___"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _check_strategy(doc: Obj, where: str, out: dict[str, str]) -> None:
    for name, (field, _kind, low, high, exclusive) in RULES.items():
        value = doc.get(name)
        if value is None:  # ``omitempty`` on a pointer: only an absent field is not validated
            continue
        key = f"{where}.{field}"
        if low is not None and (value <= low if exclusive else value < low):
            out[key] = (
                f"{field} must be greater than {_num(low)}"
                if exclusive
                else f"{field} must be {_num(low)} or greater"
            )
        elif high is not None and value > high:
            out[key] = f"{field} must be {_num(high)} or less"


def _type_error(doc: Obj) -> str:
    for name, (_field, kind, *_rest) in RULES.items():
        value = doc.get(name)
        if value is None:
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if kind == "int" and ok and not float(value).is_integer():
            ok = False
        if not ok:
            go = "int64" if kind == "int" else "float64"
            return f"json: cannot unmarshal {type(value).__name__} into Go struct field .{name} of type {go}"
    return ""


def check_colocation(text: str, where: str) -> None:
    """Koordinator's checks of ``colocation-config``; :class:`Refused` with its message."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, Mapping):
            raise ValueError(
                f"cannot unmarshal {type(doc).__name__} into Go value of type configuration.ColocationCfg"
            )
        nodes = doc.get("nodeConfigs") or []
        problem = _type_error(doc) or next(
            (e for n in nodes if isinstance(n, Mapping) for e in [_type_error(n)] if e), ""
        )
        if problem:
            raise ValueError(problem)
    except ValueError as err:
        message = f"Failed to parse colocation config in configmap {where}, err: {err}"
        raise Refused(json_error("ParseConfigFail", message)) from None
    for node in nodes:
        selector = node.get("nodeSelector") if isinstance(node, Mapping) else None
        if not isinstance(selector, Mapping) or not (
            selector.get("matchLabels") or selector.get("matchExpressions")
        ):
            name = node.get("name", "") if isinstance(node, Mapping) else ""
            what = f"configType: {COLOCATION},nodeConfig name:{name}"
            message = f"nodeConfigs NodeSelector must not empty error! {what}"
            raise Refused(json_error("ConfigParamInvalid", message))
    info: dict[str, str] = {}
    _check_strategy(doc, "ColocationCfg.ColocationStrategy", info)
    for i, node in enumerate(nodes):
        _check_strategy(node, f"ColocationCfg.NodeConfigs[{i}].ColocationStrategy", info)
    if info:
        raise Refused(json_error("ConfigParamInvalid", dict(sorted(info.items()))))


def check(config: Obj, old: Obj | None, namespace: str, name: str) -> None:
    """The ConfigMap ``config`` (``old``: before an update) is Koordinator's ``slo-controller-config``:
    every key that changed is checked; other ConfigMaps pass."""
    meta = config.get("metadata") or {}
    if meta.get("namespace") != namespace or meta.get("name") != name:
        return
    data = config.get("data") or {}
    before = (old or {}).get("data") or {}
    where = f"{namespace}/{name}"
    for key, label in PARSE_NAMES.items():
        text = data.get(key)
        if not text or (old is not None and before.get(key) == text):
            continue
        if key == COLOCATION:
            check_colocation(str(text), where)
            continue
        try:
            json.loads(str(text))
        except ValueError as err:
            raise Refused(
                json_error(
                    "ParseConfigFail", f"Failed to parse {label} config in configmap {where}, err: {err}"
                )
            ) from None
