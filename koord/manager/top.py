"""``koord-manager top nodes``: every node's reported usage, NodeMetric age and the extender's word on it.

From the API server: Nodes (allocatable, Ready), NodeMetrics (``status.nodeMetric.nodeUsage``,
``status.updateTime``). The extender's verdict (filtered, with the plugin's reason, or the score it would
give) comes from the extender's own framework and plugins run here over the same lists, with the profile
given by ``--config`` (the extender's KubeSchedulerConfiguration; default: LoadAwareScheduling with its
defaults), so it is exactly what a freshly started extender would answer: no second LoadAware. With
``--extender URL`` it asks a running extender's ``/debug/nodes/<node>`` instead, which also counts the
pods that extender has just bound. The pod judged is ``--pod namespace/name`` or, by default, a pod with
no requests (LoadAware estimates it at 250m/200Mi).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from koordshared.apis.core.pod import condition
from koordshared.apis.meta import groups
from koordshared.apis.meta.quantity import to_int, to_milli
from koordshared.apis.slo.nodemetric import parse_status
from koordshared.kube.client import ApiError, make_api_client, request
from koordshared.runtime.errors import APIUnavailable, ConfigError, PluginError

Obj = dict[str, Any]
Explain = Callable[[str], Mapping[str, Any]]
PAGE = 500
COLUMNS = ("NODE", "READY", "CPU USED/ALLOC", "MEMORY USED/ALLOC", "METRIC AGE", "EXTENDER")


def list_all(api: Any, what: str, path: str, **query: str) -> list[Obj]:
    """Every item of a list, page by page (``limit``/``continue``)."""
    items: list[Obj] = []
    token = ""
    while True:
        q = {**query, "limit": str(PAGE), **({"continue": token} if token else {})}
        doc = request(api, what, "GET", path, query=q) or {}
        items.extend(i for i in doc.get("items") or () if isinstance(i, dict))
        token = str((doc.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


def in_process(
    config_file: str, nodes: list[Obj], pods: list[Obj], metrics: list[Obj], pod: Obj | None
) -> Explain:
    """The scheduler's verdicts over these lists, from its public inspection module."""
    from koord.scheduler import inspect

    return inspect.explainer(config_file, nodes, pods, metrics, pod)


def remote(base: str, pod: str, ca_file: str, timeout: float) -> Explain:
    """A running extender's ``/debug/nodes/<node>[?pod=...]``."""
    context = ssl.create_default_context(cafile=ca_file or None) if base.startswith("https://") else None
    query = "?" + urllib.parse.urlencode({"pod": pod}) if pod else ""

    def ask(node: str) -> Mapping[str, Any]:
        url = f"{base.rstrip('/')}/debug/nodes/{urllib.parse.quote(node, safe='')}{query}"
        try:
            with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return {"error": f"{url}: HTTP {err.code}: {err.read()[:200].decode(errors='replace')}"}
        except (OSError, ValueError) as err:
            return {"error": f"{url}: {err}"}
        return doc if isinstance(doc, dict) else {"error": f"{url}: not a JSON object"}

    return ask


def verdict(explained: Mapping[str, Any]) -> str:
    """One cell: ``filtered: <why> (<plugin>)``, ``score N (<plugin> s, ...)`` or the error."""
    if "error" in explained:
        return f"error: {explained['error']}"
    if not explained.get("known", True):
        return "not in the extender's view"
    for v in explained.get("filter") or ():
        if v.get("filter") != "pass":
            return f"filtered: {v.get('filter')} ({v.get('plugin')})"
    scores = ", ".join(f"{k} {v}" for k, v in (explained.get("scores") or {}).items())
    return f"score {explained.get('extenderScore')}" + (f" ({scores})" if scores else "")


def _ready(node: Mapping[str, Any]) -> str:
    c = condition(node, "Ready")
    return "Unknown" if c is None else str(c.get("status", "Unknown"))


def _alloc(node: Mapping[str, Any]) -> tuple[int | None, int | None]:
    status = node.get("status") or {}
    res = status.get("allocatable") or status.get("capacity") or {}
    try:
        cpu = to_milli(res["cpu"]) if "cpu" in res else None
        mem = to_int(res["memory"]) if "memory" in res else None
    except Exception:
        return None, None
    return cpu, mem


def rows(nodes: Sequence[Obj], metrics: Sequence[Obj], explain: Explain, now: float) -> list[dict[str, Any]]:
    """One JSON-able row per node, by name."""
    by_node = {str((m.get("metadata") or {}).get("name")): m for m in metrics}
    out = []
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name"))):
        name = str((node.get("metadata") or {}).get("name"))
        status = parse_status((by_node.get(name) or {}).get("status"))
        cpu, mem = _alloc(node)
        usage = status.node_usage
        explained = explain(name)
        out.append(
            {
                "node": name,
                "ready": _ready(node),
                "cpuAllocatableMilli": cpu,
                "memoryAllocatableBytes": mem,
                "cpuUsedMilli": usage.cpu_milli if usage is not None else None,
                "memoryUsedBytes": usage.memory_bytes if usage is not None else None,
                "nodeMetric": name in by_node,
                "metricAgeSeconds": None
                if status.update_time is None
                else round(now - status.update_time, 1),
                "extender": verdict(explained),
                "explain": explained,
            }
        )
    return out


def _pair(used: int | None, total: int | None, unit: float, suffix: str) -> str:
    if used is None:
        return "-"
    text = f"{used / unit:.2f}{suffix}" + (f"/{total / unit:.2f}{suffix}" if total else "")
    return text + (f" ({used * 100 / total:.0f}%)" if total else "")


def table(found: Sequence[Mapping[str, Any]]) -> list[str]:
    cells = [COLUMNS] + [
        (
            r["node"],
            r["ready"],
            _pair(r["cpuUsedMilli"], r["cpuAllocatableMilli"], 1000, ""),
            _pair(r["memoryUsedBytes"], r["memoryAllocatableBytes"], 2**30, "Gi"),
            "no NodeMetric"
            if not r["nodeMetric"]
            else ("never reported" if r["metricAgeSeconds"] is None else f"{r['metricAgeSeconds']:.0f}s"),
            r["extender"],
        )
        for r in found
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]) for r in cells]


@click.group("top", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def top() -> None:
    """Cluster views from the API server."""


@top.command("nodes")
@click.option("--kubeconfig", default="", envvar="KUBECONFIG", help="kubeconfig (default: in-cluster)")
@click.option(
    "--config",
    "config_file",
    default="",
    type=click.Path(dir_okay=False),
    help="the extender's KubeSchedulerConfiguration, to judge nodes as it would",
)
@click.option("--extender", default="", help="ask a running extender at this URL instead (its /debug/nodes)")
@click.option("--extender-ca-file", default="", help="CA bundle for an https --extender")
@click.option("--pod", default="", help="namespace/name of the pod to judge nodes for (default: no requests)")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
def nodes_cmd(
    kubeconfig: str,
    config_file: str,
    extender: str,
    extender_ca_file: str,
    pod: str,
    output: str,
    timeout: float,
) -> None:
    """Every node: reported usage, NodeMetric age, and whether the extender filters it or what it scores."""
    if extender and config_file:
        raise click.UsageError("--config judges in this process, --extender asks a running one: give one")
    if pod and pod.count("/") != 1:
        raise click.BadParameter(f"{pod!r}: give namespace/name", param_hint="--pod")
    try:
        api = make_api_client(kubeconfig, user_agent="koord-manager-top")
        nodes = list_all(api, "nodes", groups.NODES.path())
        metrics = list_all(api, "nodemetrics", groups.NODE_METRICS.path())
        if extender:
            explain = remote(extender, pod, extender_ca_file, timeout)
        else:
            judged: Obj | None = None
            if pod:
                ns, name = pod.split("/")
                judged = request(api, f"pod {pod}", "GET", groups.PODS.path(name, ns))
            pods = list_all(api, "pods", groups.PODS.path(), fieldSelector=groups.NON_TERMINAL_PODS)
            explain = in_process(config_file, nodes, pods, metrics, judged)
    except (ConfigError, PluginError) as err:
        raise click.UsageError(str(err)) from err
    except (ApiError, APIUnavailable) as err:
        click.echo(f"koord-manager top nodes: {err}", err=True)
        raise SystemExit(1) from err
    found = rows(nodes, metrics, explain, time.time())
    if output == "json":
        click.echo(json.dumps({"nodes": found}, indent=1))
    else:
        click.echo("\n".join(table(found)))
