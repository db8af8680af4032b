"""Dead-code check of ``make lint``: vulture over the agent, the built-in plugins and the benchmarks.

Tests are not users: a function only tests call is dead. The plugin-author kits (``koordlet/testing``,
``koordshared/testing`` and each framework's ``testing`` module, whose users are tests) are not scanned.
Reported: unused functions, methods, classes, properties and imports at vulture's 60% confidence, and anything
at 100% (unreachable code, unused arguments). Data fields (dataclass fields, enum members) are left out:
parsers fill them by keyword, which vulture cannot see. Whatever is unused on purpose is named in ALLOWED,
with the reason; keep that list short."""

from __future__ import annotations

import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["koordlet", "koordshared", "koord", "qosplugins", "bench"]
EXCLUDE = [
    "koordlet/testing",
    "koordshared/testing",
    "koord/scheduler/testing.py",
    "koord/descheduler/testing.py",
]
KINDS = {"function", "method", "class", "property", "import"}

ALLOWED_FILES: dict[str, str] = {}
ALLOWED_NAMES = {
    "demo": "the `koordlet demo` command, imported by name when asked for (koordlet.cli)",
    "remove": "api.GaugeVec contract method for third-party plugins",
    "delete": "scheduler framework CycleState contract method (Go's CycleState.Delete) for plugins",
    "clone": "scheduler framework CycleState contract method (Go's CycleState.Clone) for plugins",
    "pods_on_node": "scheduler framework Handle contract method for third-party scheduler plugins",
    "deschedule": "descheduler framework extension point, called by name (its EXTENSION_POINTS)",
    "get_node": "descheduler framework Handle contract method for third-party descheduler plugins",
    "node_metric": "scheduler framework Handle contract method for third-party scheduler plugins",
    "convert": "click.ParamType hook, called by click",
    "get_waiting_pod": "scheduler framework SchedulerHandle contract method (Go's GetWaitingPod) for plugins",
    "iterate_waiting_pods": "scheduler framework SchedulerHandle contract method for plugins (gangs)",
    "reject_waiting_pod": "scheduler framework SchedulerHandle contract method for plugins (gangs)",
    "patch_pod": "scheduler framework SchedulerHandle contract method: PreBind plugins' merged PATCH",
    "to_add": "PreFilterExtensions.add_pod protocol parameter (preemption's what-if)",
    "to_remove": "PreFilterExtensions.remove_pod protocol parameter (preemption's what-if)",
    "delete_pod": "ClusterAPI method: DefaultPreemption deletes victims through it",
    "refresh_affinity_lists": "Snapshot contract for the InterPodAffinity plugin",
    "activate": "SchedulingQueue contract: moving pods to activeQ (PodsToActivate, gangs)",
    "register_error_handler_filters": "SchedulerHandle contract (Koordinator's RegisterErrorHandlerFilters)",
    "register_forget_pod_handler": "SchedulerHandle contract (Koordinator's RegisterForgetPodHandler)",
    "plugins_list": "click command, registered by its decorator",
    "nodes_cmd": "click command (koord-manager top nodes), registered by its decorator",
    "do_GET": "http.server handler hook",
    "do_POST": "http.server handler hook",
    "log_message": "http.server handler hook",
    "get_request": "socketserver.TCPServer hook (the webhook server wraps each connection in TLS there)",
    "official_client": "SchedulerHandle.client contract: plugins' typed API calls on a lean client",
}
PENDING_CALLERS: dict[str, dict[str, tuple[str, ...]]] = {
    # The pod-side half of the node-scheduler contract (docs/node-scheduler-contract.md): koord-scheduler's
    # NodeNUMAResource reads what the pods ask for and the
    # kubelet's allocations with these; the agent only writes the annotations and reads resource-status.
    "koord-scheduler NodeNUMAResource": {
        "koordshared/apis/extension/numa.py": (
            "CPUBindPolicy",
            "CPUExclusivePolicy",
            "NodeCPUBindPolicy",
            "NUMAAllocateStrategy",
            "NUMATopologyPolicy",
            "resource_spec",
            "numa_topology_spec",
        ),
        "koordshared/apis/topology/noderesourcetopology.py": ("pod_cpu_allocs",),
    },
}
_PENDING = {(f, n) for files in PENDING_CALLERS.values() for f, names in files.items() for n in names}


def main() -> int:
    v = Vulture(ignore_names=list(ALLOWED_NAMES))
    v.scavenge([str(ROOT / p) for p in PATHS], exclude=[str(ROOT / e) for e in EXCLUDE])
    dead = []
    for item in v.get_unused_code(min_confidence=60):
        rel = Path(item.filename).resolve().relative_to(ROOT).as_posix()
        if rel in ALLOWED_FILES or (rel, item.name) in _PENDING:
            continue
        if item.typ in KINDS or item.confidence >= 100:
            dead.append(f"{rel}:{item.first_lineno}: unused {item.typ} {item.name!r}")
    for line in dead:
        print(line)
    if dead:
        print(f"dead code: {len(dead)} item(s); delete them, or name them in .ci/deadcode.py with a reason")
        return 1
    allowed = len(ALLOWED_NAMES) + len(ALLOWED_FILES) + len(_PENDING)
    print(f"dead code: none (vulture over {', '.join(PATHS)}; {allowed} allowed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
