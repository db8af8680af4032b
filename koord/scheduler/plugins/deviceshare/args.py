"""``DeviceShareArgs``: Koordinator's fields, defaults (``SetDefaults_DeviceShareArgs``) and validation
(``ValidateDeviceShareArgs``), read strictly from the profile's ``pluginConfig[].args``.
Details: ``docs/modules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordshared.apis.meta.strictargs import decode
from koordshared.apis.scheduling import device as dv
from koordshared.runtime.errors import InvalidArgs

LEAST, MOST = "LeastAllocated", "MostAllocated"
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = (
    (dv.RESOURCE_GPU_MEMORY_RATIO, 1),
    (dv.RESOURCE_GPU_MEMORY, 1),
    (dv.RESOURCE_RDMA, 1),
    (dv.RESOURCE_FPGA, 1),
)
DEFAULT_TEMPLATES_NAMESPACE = "koordinator-system"
DEFAULT_TEMPLATES_NAME = "gpu-shared-resource-templates"


@dataclass(frozen=True, slots=True)
class TemplatesConfig:
    namespace: str = DEFAULT_TEMPLATES_NAMESPACE
    name: str = DEFAULT_TEMPLATES_NAME
    matched_resources: tuple[str, ...] = (dv.RESOURCE_HUAWEI_NPU_CORE,)


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    scoring_type: str = LEAST
    scoring_resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    disable_numa_alignment: bool = False
    templates: TemplatesConfig = TemplatesConfig()
    unsupported_models: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """GPU vendor -> models that cannot be shared."""


def _resources(raw: list[Any]) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for i, item in enumerate(raw):
        at = f"scoringStrategy.resources[{i}]."
        r = decode(item, {"name": "str", "weight": "int"}, at)
        name, weight = r.get("name", ""), r.get("weight", 0)
        if not 0 < weight <= 100:
            raise InvalidArgs(f"{at}weight: resource weight of {name} not in valid range (0, 100]")
        if not name:
            raise InvalidArgs(f"{at}name: want a resource name")
        out.append((name, weight))
    return tuple(out)


def parse_args(raw: Mapping[str, Any] | None) -> DeviceShareArgs:
    """Decode, default and validate; :class:`InvalidArgs` names the first field in error."""
    v = decode(
        raw,
        {
            "allocator": "str",
            "scoringStrategy": "object",
            "disableDeviceNUMATopologyAlignment": "bool",
            "gpuSharedResourceTemplatesConfig": "object",
            "gpuShareUnsupportedModels": "object_list",
        },
    )
    kind, resources = LEAST, DEFAULT_RESOURCES
    if "scoringStrategy" in v:
        s = decode(v["scoringStrategy"], {"type": "str", "resources": "object_list"}, "scoringStrategy.")
        kind = s.get("type", "")
        if kind not in (LEAST, MOST):
            raise InvalidArgs(f"scoringStrategy.type: scoring strategy {kind!r} is not supported")
        resources = _resources(s.get("resources", []))
    templates = TemplatesConfig()
    if "gpuSharedResourceTemplatesConfig" in v:
        t = decode(
            v["gpuSharedResourceTemplatesConfig"],
            {"configMapNamespace": "str", "configMapName": "str", "matchedResources": "str_list"},
            "gpuSharedResourceTemplatesConfig.",
        )
        templates = TemplatesConfig(
            t.get("configMapNamespace", ""), t.get("configMapName", ""), t.get("matchedResources", ())
        )
    models: dict[str, set[str]] = {}
    for i, m in enumerate(v.get("gpuShareUnsupportedModels", ())):
        got = decode(m, {"vendor": "str", "model": "str"}, f"gpuShareUnsupportedModels[{i}].")
        models.setdefault(got.get("vendor", ""), set()).add(got.get("model", ""))
    return DeviceShareArgs(
        kind,
        resources,
        v.get("disableDeviceNUMATopologyAlignment", False),
        templates,
        {vendor: frozenset(ms) for vendor, ms in models.items()},
    )
