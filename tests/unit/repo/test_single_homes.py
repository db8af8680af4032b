"""Facts computed in one place: each test finds the fact's shape in the code packages and allows it only
in its home (plus named exceptions that are a different rule)."""

from __future__ import annotations

import ast
import re

from tests.support.importgraph import code_packages, tracked
from tests.support.paths import ROOT


def _code_files() -> list[str]:
    roots = code_packages()
    return [f for f in tracked() if f.split("/", 1)[0] in roots]


def _functions(rel: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    tree = ast.parse((ROOT / rel).read_text())
    return [(n.name, n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _constants(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_pod_requests_rule() -> None:
    # Kubernetes' PodRequests (containers, sidecars, init peak, overhead): a function that reads
    # initContainers and tells sidecars (restartPolicy Always) apart is that rule.
    allowed = {
        "koordshared/apis/core/resources.py:_pod_total",
        # Koordinator's calculatePodResourceRequest: defaults per container, no sidecar step
        "koord/scheduler/plugins/noderesourcesfitplus/plugin.py:pod_request",
        # lists a pod's sidecar containers (their cgroups), sums nothing
        "koordlet/statesinformer/podinfo.py:pod_info",
    }
    found = {
        f"{rel}:{name}"
        for rel in _code_files()
        for name, fn in _functions(rel)
        if {"initContainers", "restartPolicy", "Always"} <= _constants(fn)
    }
    assert found == allowed


def test_pod_key() -> None:
    # A pod's "namespace/name" key (and the uid-or-key) is koordshared.apis.core.pod's pod_key / pod_uid.
    shape = re.compile(r"get\(.namespace.\)[^}\n]*\}/\{[^}\n]*get\(.name.\)")
    found = {rel for rel in _code_files() if shape.search((ROOT / rel).read_text())}
    # nodemetric.py names a PodMetricInfo entry (not a pod) in a parse diagnostic
    assert found == {"koordshared/apis/core/pod.py", "koordshared/apis/slo/nodemetric.py"}


def test_binding_body() -> None:
    # The v1 Binding a scheduler POSTs is built by koordshared.apis.core.pod.binding alone.
    found = {rel for rel in _code_files() if '"kind": "Binding"' in (ROOT / rel).read_text()}
    assert found == {"koordshared/apis/core/pod.py"}


def test_prebind_patch_is_sent_from_the_handle() -> None:
    # The PreBind plugins' merged PATCH is kept and sent by the scheduler's handle alone.
    found = {rel for rel in _code_files() if re.search(r"\bPATCH_KEY\b", (ROOT / rel).read_text())}
    assert found == {"koord/scheduler/core/handle.py"}


def _node_minus_pods_minus_apps(call: ast.AST) -> bool:
    """``max(node - pods - apps, 0…)``: the shape of "what the system uses" (a subtraction of three that
    names pods and apps; others of that shape, such as rss - traced - tracing, are other facts)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "max"):
        return False
    first = call.args[0] if call.args else None
    three = isinstance(first, ast.BinOp) and isinstance(first.op, ast.Sub)
    three = three and isinstance(first.left, ast.BinOp) and isinstance(first.left.op, ast.Sub)  # type: ignore[union-attr]
    zero = any(isinstance(a, ast.Constant) and a.value == 0 for a in call.args[1:])
    names = ast.unparse(first).lower() if first is not None else ""
    return three and zero and "pod" in names and "app" in names


def test_system_usage() -> None:
    # system = node - pods - host apps (koordlet's getSystemUsage) is koordlet.api.system_usage alone.
    found = {
        rel
        for rel in _code_files()
        if any(_node_minus_pods_minus_apps(n) for n in ast.walk(ast.parse((ROOT / rel).read_text())))
    }
    assert found == {"koordlet/api/metrics.py"}


def test_sweep_arithmetic() -> None:
    # The pod sweep's rates (CPU ns over time, throttled over periods) are podcolumns' alone: the
    # collector reads, publishes and reports, and computes none of them.
    tree = ast.parse((ROOT / "koordlet/metricsadvisor/podresource.py").read_text())
    rates = [
        ast.unparse(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Div)
        and any(isinstance(c, ast.Constant) and c.value == 1e9 for c in ast.walk(n.right))
    ]
    assert rates == []
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"dthrottled", "dperiods", "delta", "cpu_base", "thr_base"}


def test_metric_cache_kind_names() -> None:
    # Every metric-cache kind is named once, in koordlet.api.metrics (with its properties).
    from koordlet.api import metrics

    kinds = {
        v
        for k, v in vars(metrics).items()
        if k.isupper() and isinstance(v, str) and not k.startswith("EVENT")
    }
    assert set(metrics.PROPERTIES) <= kinds
    found: dict[str, set[str]] = {}
    for rel in _code_files():
        for n in ast.walk(ast.parse((ROOT / rel).read_text())):
            if isinstance(n, ast.Constant) and n.value in kinds:
                found.setdefault(rel, set()).add(n.value)
    # metricdefs spells the Prometheus names koordlet_container_cpi, koordlet_pod_psi... from the same words
    found.pop("koordlet/metricdefs.py", None)
    assert set(found) == {"koordlet/api/metrics.py"}


def test_prometheus_metric_names() -> None:
    # Every koordlet_* series the agent exposes is a MetricDef of koordlet.metricdefs (Koordinator's in
    # KOORDLET_METRICS, the agent's own in AGENT_METRICS); components take names and help from there.
    shape = re.compile(r"koordlet_[a-z0-9_]+")
    found = {
        rel
        for rel in _code_files()
        if rel.startswith("koordlet/") and not rel.startswith("koordlet/testing/")
        for n in ast.walk(ast.parse((ROOT / rel).read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and shape.fullmatch(n.value)
    }
    assert found == set()  # metricdefs spells them koordlet_<name>


def test_collectors_take_options() -> None:
    # Every collector is built as Collector(config, opts) (koordlet's framework.Options), plus
    # keyword-only extras of its own: the dependencies they share are one value, not six parameters.
    import inspect

    from koordlet.metricsadvisor import advisor

    collectors = [
        v
        for v in vars(advisor).values()
        if inspect.isclass(v) and (v.__name__.endswith("Collector") or v.__name__ == "FastSampler")
    ]
    assert len(collectors) >= 9
    for cls in collectors:
        params = list(inspect.signature(cls).parameters.values())
        assert [p.name for p in params[:2]] == ["config", "opts"], cls
        assert all(p.kind is p.KEYWORD_ONLY for p in params[2:]), cls
