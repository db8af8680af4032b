"""The scheduler's public inspection API: its plugins' verdicts on nodes, computed away from a server.

``koord-manager top nodes`` shows what a freshly started scheduler would say of every node without
importing the scheduler's internals: it hands this module the lists it read from the API server and gets
back one function, node name -> the same document ``/debug/nodes/<node>`` serves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Obj = dict[str, Any]


def explainer(
    config_file: str, nodes: list[Obj], pods: list[Obj], metrics: list[Obj], pod: Obj | None
) -> Callable[[str], Mapping[str, Any]]:
    """The profile of ``config_file`` (default: LoadAwareScheduling with its defaults) run over these
    lists, its caches trimmed as the running extender trims them; ``pod`` defaults to a pod with no
    requests. Raises ``ConfigError``/``PluginError`` for a bad profile."""
    from prometheus_client import CollectorRegistry

    from koord.scheduler.extender.handle import ExtenderHandle, extender_watches
    from koord.scheduler.extender.metrics import ExtenderMetrics
    from koord.scheduler.extender.verbs import Extender
    from koord.scheduler.framework.profile import default_profile, load_profile
    from koord.scheduler.framework.runtime import Framework
    from koord.scheduler.plugins import plugin_registry
    from koordshared.kube.informers import MemoryInformerSet

    profile = load_profile(config_file) if config_file else default_profile()
    caches = MemoryInformerSet(extender_watches(), {"nodes": nodes, "pods": pods, "nodemetrics": metrics})
    handle = ExtenderHandle(caches["nodes"], caches["pods"], caches["nodemetrics"])
    framework = Framework(profile, plugin_registry(), handle)
    extender = Extender(framework, handle, ExtenderMetrics(CollectorRegistry()), ready=lambda: True)
    names = [str((n.get("metadata") or {}).get("name") or "") for n in nodes]
    answers: dict[str, Mapping[str, Any]] = {}

    def explain(node: str) -> Mapping[str, Any]:
        if not answers:  # one pass over every node, as one scheduling cycle sees them
            answers.update(extender.explain_nodes(names, pod))
        return answers.get(node) or extender.explain(node, pod)

    return explain
