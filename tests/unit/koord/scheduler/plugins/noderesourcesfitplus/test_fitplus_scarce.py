"""NodeResourcesFitPlus and ScarceResourceAvoidance: scores computed by hand from Koordinator's formulas
(its own unit tests' clusters), each checked on the batch path and node by node (``pluginrun``); strict
args; and placement end to end in MemoryScheduler."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.plugins.noderesourcesfitplus import NAME as FIT_PLUS
from koord.scheduler.plugins.noderesourcesfitplus.plugin import pod_request
from koord.scheduler.plugins.scarceresourceavoidance import NAME as SCARCE
from koord.scheduler.testing import MemoryScheduler
from koordshared.runtime.errors import InvalidArgs
from koordshared.testing.objects import node, pod
from tests.support.scheduler.pluginrun import PluginRun

GPU = "nvidia.com/gpu"
S = "koord-scheduler"


def big_node(name: str, **extra: str) -> dict[str, Any]:
    """Koordinator's test node: 96 cpu, 512Gi, 100Gi ephemeral storage, and ``extra`` resources."""
    n = node(name, "96", "512Gi")
    for part in ("allocatable", "capacity"):
        n["status"][part].update({"ephemeral-storage": "100Gi", **extra})
    return n


FIT_ARGS = {
    "resources": {
        GPU: {"type": "MostAllocated", "weight": 2},
        "cpu": {"type": "LeastAllocated", "weight": 1},
        "memory": {"type": "LeastAllocated", "weight": 1},
    }
}


def test_fit_plus_scores_each_resource_with_its_own_strategy_and_weight() -> None:
    run = PluginRun(
        FIT_PLUS,
        FIT_ARGS,
        nodes=[big_node("n1", **{GPU: "8"}), big_node("n2", **{GPU: "8", "xx.xx/xx": "8"})],
        pods=[pod("busy", node_name="n1", requests={"cpu": "16", "memory": "32Gi", GPU: "4"})],
    )
    incoming = pod("p", requests={"cpu": "16", "memory": "32Gi", GPU: "2", "ephemeral-storage": "10Gi"})
    # n1: gpu Most (4+2)/8 -> 75 (x2); cpu Least (96-32)/96 -> 66; memory Least (512-64)/512 -> 87.
    #     (150 + 66 + 87) // 4 = 75. Ephemeral storage is requested but not in the args: left out.
    # n2: gpu 2/8 -> 25 (x2); cpu 80/96 -> 83; memory 480/512 -> 93. (50 + 83 + 93) // 4 = 56.
    assert run.scores(incoming) == {"n1": 75, "n2": 56}


def test_fit_plus_counts_defaults_for_cpu_and_memory_and_scores_100_without_a_named_resource() -> None:
    run = PluginRun(
        FIT_PLUS,
        {"resources": {"cpu": {"type": "MostAllocated", "weight": 1}}},
        nodes=[node("a", "1", "4Gi")],
        # A container without a cpu request counts 100m on the node, as in kube-scheduler's scoring.
        pods=[pod("nothing", node_name="a")],
    )
    two = pod("p", requests={"cpu": "200m"})
    two["spec"]["containers"].append({"name": "sidecar", "resources": {}})
    # 100m (the node's pod) + 200m + 100m (the container asking nothing) of 1000m: 40.
    assert run.scores(two) == {"a": 40}
    # Memory only requested: cpu is not a resource the pod requests, memory is not in the args.
    assert run.scores(pod("m", requests={"memory": "1Gi"})) == {"a": 100}


def test_fit_plus_scores_0_when_the_node_lacks_the_resource_or_is_overcommitted() -> None:
    run = PluginRun(
        FIT_PLUS,
        {
            "resources": {
                GPU: {"type": "LeastAllocated", "weight": 3},
                "cpu": {"type": "LeastAllocated", "weight": 1},
            }
        },
        nodes=[node("plain", "4", "8Gi"), big_node("gpu", **{GPU: "1"})],
    )
    # plain: gpu 0 (none there, weight still counts), cpu (4000-1000)/4000 -> 75: 75 // 4 = 18.
    # gpu: gpu requested 2 > 1 -> 0; cpu (96000-1000)/96000 -> 98: 98 // 4 = 24.
    assert run.scores(pod("p", requests={"cpu": "1", GPU: "2"})) == {"plain": 18, "gpu": 24}


def test_pod_request_follows_sidecar_and_init_rules() -> None:
    def with_inits(*inits: tuple[str, bool]) -> dict[str, Any]:
        p = pod("p", requests={"cpu": "2"})
        p["spec"]["initContainers"] = [
            {
                "name": f"i{i}",
                "resources": {"requests": {"cpu": cpu}},
                **({"restartPolicy": "Always"} if side else {}),
            }
            for i, (cpu, side) in enumerate(inits)
        ]
        return p

    assert pod_request(with_inits(("10", False)), "cpu") == 10000  # max(2, 10)
    assert pod_request(with_inits(("1", True)), "cpu") == 3000  # 2 + 1
    assert pod_request(with_inits(("1", True), ("5", False)), "cpu") == 5000  # max(2 + 1, 5)
    assert pod_request(pod("none"), "memory") == 200 * 1024 * 1024


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": {"cpu": {"type": "RequestedToCapacityRatio", "weight": 1}}}, "resources[cpu].type"),
        ({"resources": {"cpu": {"weight": 1}}}, "resources[cpu].type"),
        ({"resources": {"cpu": {"type": "MostAllocated", "weight": 0}}}, "resources[cpu].weight"),
        ({"resources": {"cpu": {"type": "MostAllocated", "weight": "2"}}}, "resources[cpu].weight"),
        ({"resources": {"cpu": {"type": "MostAllocated", "wieght": 2}}}, "wieght"),
        ({"resources": ["cpu"]}, "resources"),
        ({"resource": {}}, "resource"),
    ],
)
def test_fit_plus_refuses_bad_args_naming_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs, match=field.replace("[", r"\[").replace("]", r"\]")):
        PluginRun(FIT_PLUS, args)


def test_fit_plus_without_resources_scores_every_node_100() -> None:
    run = PluginRun(FIT_PLUS, None, nodes=[node("a"), node("b")])
    assert run.scores(pod("p", requests={"cpu": "1"})) == {"a": 100, "b": 100}


def test_scarce_resource_avoidance_keeps_pods_off_resources_they_do_not_need() -> None:
    run = PluginRun(
        SCARCE,
        {"resources": [GPU]},
        nodes=[
            big_node("gpu", **{GPU: "8", "xx.xx/xx": "8"}),
            big_node("plain"),
            node("bare", "96", "512Gi"),
        ],
    )
    # gpu: has cpu, memory, ephemeral-storage, gpu, xx (pods is not counted); unused by a cpu+memory pod:
    # ephemeral-storage, gpu, xx (3), scarce among them: gpu (1): (3 - 1) * 100 // 3 = 66.
    # plain: unused ephemeral-storage only, none scarce: 100; bare: nothing unused: 100.
    cpu_pod = pod("p", requests={"cpu": "16", "memory": "32Gi"})
    assert run.scores(cpu_pod) == {"gpu": 66, "plain": 100, "bare": 100}
    # A pod that asks for the GPU leaves nothing scarce unused anywhere.
    assert run.scores(pod("g", requests={"cpu": "1", GPU: "1"})) == {"gpu": 100, "plain": 100, "bare": 100}


def test_scarce_resource_avoidance_koordinators_case() -> None:
    run = PluginRun(
        SCARCE,
        {"resources": [GPU]},
        nodes=[_with(node("n1", "96", "512Gi"), **{GPU: "8", "xx.xx/xx": "8"}), node("n2", "96", "512Gi")],
    )
    # n1: unused gpu and xx, scarce gpu: (2 - 1) * 100 // 2 = 50; n2: nothing unused: 100.
    assert run.scores(pod("p", requests={"cpu": "16", "memory": "32Gi"})) == {"n1": 50, "n2": 100}


def _with(n: dict[str, Any], **extra: str) -> dict[str, Any]:
    for part in ("allocatable", "capacity"):
        n["status"][part].update(extra)
    return n


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"resources": "nvidia.com/gpu"}, "resources"),
        ({"resources": [""]}, r"resources\[0\]"),
        ({"x": []}, "x"),
    ],
)
def test_scarce_refuses_bad_args(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgs, match=field):
        PluginRun(SCARCE, args)


def _only_score(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "profiles": [
            {
                "schedulerName": S,
                "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": name, "weight": 1}]}},
                "pluginConfig": [{"name": name, "args": args}],
            }
        ]
    }


def test_end_to_end_cpu_pods_avoid_the_gpu_node_and_gpu_pods_pack() -> None:
    kit = MemoryScheduler(_only_score(SCARCE, {"resources": [GPU]}))
    kit.add_node(_with(node("gpu", "8", "32Gi"), **{GPU: "4"}))
    kit.add_node(node("cpu", "8", "32Gi"))
    for i in range(3):
        kit.add_pod(pod(f"c{i}", requests={"cpu": "1"}, scheduler_name=S))
    kit.run()
    assert set(kit.bound().values()) == {"cpu"}

    kit = MemoryScheduler(_only_score(FIT_PLUS, {"resources": {GPU: {"type": "MostAllocated", "weight": 1}}}))
    for name in ("g1", "g2"):
        kit.add_node(_with(node(name, "8", "32Gi"), **{GPU: "4"}))
    kit.add_pod(pod("first", requests={GPU: "1"}, scheduler_name=S))
    kit.run()
    (first,) = kit.bound().values()
    for i in range(3):
        kit.add_pod(pod(f"g{i}", requests={GPU: "1"}, scheduler_name=S))
    kit.run()
    assert set(kit.bound().values()) == {first}  # MostAllocated on the GPU: all four on one node
