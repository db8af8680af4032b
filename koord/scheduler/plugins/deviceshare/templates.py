"""GPU shared-resource templates (Koordinator's ``gpuSharedResourceTemplatesCache``): some GPU models (Huawei
Ascend NPUs) can only be shared in fixed slices. The ConfigMap named in the args holds them under
``data.yaml``: ``<vendor>-<model>`` -> template name -> resources. A shared request naming one of the args'
matched resources must equal a template of the node's model exactly; the allocation records its name."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import yaml

from koord.scheduler.plugins.deviceshare.resources import ResourceList
from koordshared.apis.core.pod import as_map
from koordshared.apis.scheduling.device import resource_values

log = logging.getLogger(__name__)
DATA_KEY = "data.yaml"

TemplateSet = Mapping[str, Mapping[str, ResourceList]]
"""``vendor-model`` -> template name -> resources."""


def parse_templates(config_map: Mapping[str, Any]) -> dict[str, dict[str, ResourceList]]:
    """The templates of the ConfigMap; ``ValueError`` naming the problem when ``data.yaml`` is not a map of
    maps of resource lists."""
    doc = yaml.safe_load(str(as_map(config_map, "data").get(DATA_KEY) or "")) or {}
    if not isinstance(doc, Mapping):
        raise ValueError(f"{DATA_KEY}: want a map of <vendor>-<model> to templates")
    out: dict[str, dict[str, ResourceList]] = {}
    for key, templates in doc.items():
        if not isinstance(templates, Mapping) or not all(isinstance(t, Mapping) for t in templates.values()):
            raise ValueError(f"{DATA_KEY}: {key}: want a map of template name to resources")
        out[str(key)] = {str(name): resource_values(t) for name, t in templates.items()}
    return out


class Templates:
    """The current templates, replaced whole on every ConfigMap change (none while it is absent)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set: dict[str, dict[str, ResourceList]] = {}
        self.generation = 0
        """Bumped on every replacement: what was worked out with older templates is stale."""

    def current(self) -> TemplateSet:
        with self._lock:
            return self._set

    def config_map_changed(self, config_map: Mapping[str, Any]) -> None:
        try:
            parsed = parse_templates(config_map)
        except (ValueError, yaml.YAMLError) as err:
            log.error("GPU shared resource templates: %s (keeping the previous ones)", err)
            return
        with self._lock:
            self._set = parsed
            self.generation += 1

    def config_map_deleted(self, config_map: Mapping[str, Any]) -> None:
        with self._lock:
            self._set = {}
            self.generation += 1
