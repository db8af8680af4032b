"""koord-manager's webhook rules against Koordinator's cases (``webhook/pod/mutating`` and ``validating``,
``webhook/cm``, ``webhook/elasticquota``): the ClusterColocationProfile mutation, the QoS x priority
combinations refused, the slo-controller-config messages and the ElasticQuota tree checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord.manager.webhook import colocationprofile as ccp
from koord.manager.webhook import configmapvalidating as cmv
from koord.manager.webhook import podvalidating as pv
from koord.manager.webhook import quotavalidating as qv
from koord.manager.webhook.admission import json_patch

FORBIDDEN = "Pod: Forbidden: koordinator.sh/qosClass"
COMBO = "cannot be used in combination"
CS = "ColocationCfg.ColocationStrategy"
BATCH = {"value": 5999, "preemptionPolicy": "PreemptLowerPriority"}


def lookups(draw: int = 0, ns_labels: dict[str, str] | None = None) -> ccp.Lookups:
    classes: dict[str, dict[str, Any]] = {"koordinator-batch": BATCH, "koord-mid": {"value": 7999}}
    return ccp.Lookups(
        lambda _ns: ns_labels or {"koordinator.sh/enable-colocation": "true"}, classes.get, lambda _n: draw
    )


def container(name: str, requests: dict[str, str] | None, limits: dict[str, str] | None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return {"name": name, "image": "busybox", "resources": res}


def pod(*containers: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "labels": labels or {"koordinator-colocation-pod": "true"},
        },
        "spec": {"containers": list(containers), "schedulerName": "nonExistSchedulerName", **spec},
    }


def profile(name: str = "test-profile", **spec: Any) -> dict[str, Any]:
    base = {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
        "labels": {"testLabelA": "valueA"},
        "annotations": {"testAnnotationA": "valueA"},
        "schedulerName": "koordinator-scheduler",
        "qosClass": "BE",
        "priorityClassName": "koordinator-batch",
        "koordinatorPriority": 1111,
    }
    return {"metadata": {"name": name}, "spec": {**base, **spec}}


def test_koordinators_first_case_becomes_a_be_batch_pod() -> None:
    p = pod(
        container("test-container-a", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "500m", "memory": "1Gi"}),
        container("test-container-b", {"cpu": "1", "memory": "4Gi"}, {"cpu": "1", "memory": "4Gi"}),
        overhead={"cpu": "1", "memory": "2Gi"},
        priority=5999,
    )
    out = ccp.mutate(p, [profile()], lookups())
    labels = out["metadata"]["labels"]
    assert labels["koordinator.sh/qosClass"] == "BE" and labels["koordinator.sh/priority"] == "1111"
    assert labels["testLabelA"] == "valueA" and out["metadata"]["annotations"]["testAnnotationA"] == "valueA"
    spec = out["spec"]
    assert (spec["schedulerName"], spec["priorityClassName"], spec["priority"]) == (
        "koordinator-scheduler",
        "koordinator-batch",
        5999,
    )
    a, b = (c["resources"] for c in spec["containers"])
    assert a == {
        "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
    }
    assert b["requests"] == {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "4Gi"}
    assert spec["overhead"] == {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"}
    annotation = json.loads(out["metadata"]["annotations"][ccp.EXTENDED_RESOURCE_SPEC])
    assert annotation["containers"]["test-container-a"]["limits"]["kubernetes.io/batch-cpu"] == "500"


@pytest.mark.parametrize(
    ("case", "requests", "limits", "want_requests", "want_limits"),
    [
        (
            "a limit gives its request",
            None,
            {"cpu": "1", "memory": "4Gi"},
            {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "4Gi"},
            {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "4Gi"},
        ),
        (
            "no limit stays unlimited",
            {"cpu": "1", "memory": "4Gi"},
            None,
            {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "4Gi"},
            None,
        ),
        (
            "other resources stay",
            {"cpu": "250m", "nvidia.com/gpu": "1"},
            None,
            {"kubernetes.io/batch-cpu": "250", "nvidia.com/gpu": "1"},
            None,
        ),
    ],
)
def test_requests_and_limits_move_as_koordinator_moves_them(
    case: str, requests: Any, limits: Any, want_requests: Any, want_limits: Any
) -> None:
    out = ccp.mutate(pod(container("c", requests, limits)), [profile()], lookups())
    res = out["spec"]["containers"][0]["resources"]
    assert res.get("requests") == want_requests and res.get("limits") == want_limits, case


def test_a_mid_profile_asks_for_mid_resources_and_a_prod_pod_keeps_cpu() -> None:
    mid = profile(qosClass="LS", priorityClassName="koord-mid")
    out = ccp.mutate(pod(container("c", {"cpu": "2", "memory": "1Gi"}, None)), [mid], lookups())
    assert out["spec"]["containers"][0]["resources"]["requests"] == {
        "kubernetes.io/mid-cpu": "2k",
        "kubernetes.io/mid-memory": "1Gi",
    }
    prod = profile(qosClass="LS", priorityClassName="")
    out = ccp.mutate(pod(container("c", {"cpu": "2"}, None), priority=9000), [prod], lookups())
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_selectors_probability_order_and_skip_annotation() -> None:
    p = pod(container("c", {"cpu": "1"}, None))
    other_ns = lookups(ns_labels={"team": "x"})
    assert ccp.mutate(p, [profile()], other_ns)["metadata"]["labels"].get("koordinator.sh/qosClass") is None
    # probability 50 %: a draw of 51 skips, 50 applies (Koordinator: skip when rand > percent)
    half = profile(probability="50%")
    assert "testLabelA" not in ccp.mutate(p, [half], lookups(draw=51))["metadata"]["labels"]
    assert "testLabelA" in ccp.mutate(p, [half], lookups(draw=50))["metadata"]["labels"]
    assert "testLabelA" not in ccp.mutate(p, [profile(probability=0)], lookups())["metadata"]["labels"]
    # profiles apply in name order: the later name wins
    a, b = profile("a", labels={"k": "a"}), profile("b", labels={"k": "b"})
    assert ccp.mutate(p, [b, a], lookups())["metadata"]["labels"]["k"] == "b"
    keep = profile()
    keep["metadata"]["annotations"] = {ccp.SKIP_UPDATE_RESOURCES: ""}
    assert ccp.mutate(p, [keep], lookups())["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}


def test_an_unknown_priority_class_fails_the_mutation() -> None:
    with pytest.raises(ccp.ProfileError, match='"nope" not found'):
        ccp.mutate(pod(container("c", {"cpu": "1"}, None)), [profile(priorityClassName="nope")], lookups())


def test_the_patch_is_the_difference_only() -> None:
    before = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": [1], "y": 2}}
    after = {"metadata": {"labels": {"a": "1", "b/c": "2"}}, "spec": {"x": [1, 2]}}
    assert json_patch(before, after) == [
        {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
        {"op": "remove", "path": "/spec/y"},
        {"op": "replace", "path": "/spec/x", "value": [1, 2]},
    ]


def labelled(qos: str, priority: int | None = None, cpu: str = "1", **res: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container("c", {"cpu": cpu, **res}, None)]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"labels": {"koordinator.sh/qosClass": qos} if qos else {}}, "spec": spec}


@pytest.mark.parametrize(
    ("case", "obj", "want"),
    [
        (
            "BE without priority",
            labelled("BE"),
            ["Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass= cannot be used in combination"],
        ),
        (
            "BE prod",
            labelled("BE", 9000),
            [f"{FORBIDDEN}=BE and priorityClass=koord-prod {COMBO}"],
        ),
        ("BE batch", labelled("BE", 5999), []),
        (
            "LSR batch",
            labelled("LSR", 5999),
            [f"{FORBIDDEN}=LSR and priorityClass=koord-batch {COMBO}"],
        ),
        (
            "LSR prod, fractional cpu",
            labelled("LSR", 9000, cpu="1500m"),
            [
                'pod.spec.containers[*].resources.requests: Invalid value: "1500m": '
                "the requested CPUs of LSR Pod must be integer"
            ],
        ),
        (
            "batch resources without BE",
            {
                "metadata": {},
                "spec": {"containers": [container("c", {"kubernetes.io/batch-cpu": "1k"}, None)]},
            },
            [
                "labels.koordinator.sh/qosClass: Required value: "
                "must specify koordinator QoS BE with koordinator colocation resources"
            ],
        ),
    ],
)
def test_qos_and_priority_combinations_koordinator_forbids(case: str, obj: Any, want: list[str]) -> None:
    assert pv.errors(obj) == want, case


def test_on_update_the_qos_class_is_immutable_and_several_errors_are_bracketed() -> None:
    old, new = labelled("LS", 9000), labelled("BE", 9000)
    errs = pv.errors(new, old)
    assert errs[0] == 'labels.koordinator.sh/qosClass: Invalid value: "BE": field is immutable'
    assert pv.message(errs) == "[" + ", ".join(errs) + "]" and len(errs) == 2


def cm(**data: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "koordinator-system", "name": "slo-controller-config"},
        "data": {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()},
    }


@pytest.mark.parametrize(
    ("case", "colocation", "want"),
    [
        ("valid", {"enable": True, "cpuReclaimThresholdPercent": 60}, None),
        (
            "out of range",
            {"midCPUThresholdPercent": 101, "degradeTimeMinutes": 0, "resourceDiffThreshold": 0},
            '___{"reason":"ConfigParamInvalid","message":{'
            f'"{CS}.DegradeTimeMinutes":"DegradeTimeMinutes must be 1 or greater",'
            f'"{CS}.MidCPUThresholdPercent":"MidCPUThresholdPercent must be 100 or less",'
            f'"{CS}.ResourceDiffThreshold":"ResourceDiffThreshold must be greater than 0"'
            "}}___",
        ),
        (
            "node strategy without selector",
            {"nodeConfigs": [{"name": "a"}]},
            '___{"reason":"ConfigParamInvalid","message":"nodeConfigs NodeSelector must not empty error! '
            'configType: colocation-config,nodeConfig name:a"}___',
        ),
        (
            "node strategy out of range",
            {
                "nodeConfigs": [
                    {
                        "name": "a",
                        "nodeSelector": {"matchLabels": {"x": "y"}},
                        "cpuReclaimThresholdPercent": -1,
                    }
                ]
            },
            '___{"reason":"ConfigParamInvalid","message":{'
            '"ColocationCfg.NodeConfigs[0].ColocationStrategy.CPUReclaimThresholdPercent":'
            '"CPUReclaimThresholdPercent must be 0 or greater"}}___',
        ),
    ],
)
def test_colocation_config_refused_with_koordinators_messages(
    case: str, colocation: Any, want: str | None
) -> None:
    if want is None:
        cmv.check(
            cm(**{"colocation-config": colocation}), None, "koordinator-system", "slo-controller-config"
        )
        return
    with pytest.raises(cmv.Refused) as err:
        cmv.check(
            cm(**{"colocation-config": colocation}), None, "koordinator-system", "slo-controller-config"
        )
    assert str(err.value) == want, case


def test_a_config_that_does_not_parse_and_an_unchanged_key_on_update() -> None:
    bad = cm(**{"colocation-config": '{"enable": "yes'})
    with pytest.raises(
        cmv.Refused,
        match=r'^___\{"reason":"ParseConfigFail","message":"Failed to parse colocation config in '
        r'configmap koordinator-system/slo-controller-config, err: .*"\}___$',
    ):
        cmv.check(bad, None, "koordinator-system", "slo-controller-config")
    typed = cm(**{"colocation-config": {"cpuReclaimThresholdPercent": "60"}})
    with pytest.raises(
        cmv.Refused, match=r"cannot unmarshal str into Go struct field \.cpuReclaimThresholdPercent"
    ):
        cmv.check(typed, None, "koordinator-system", "slo-controller-config")
    stale = cm(**{"colocation-config": {"degradeTimeMinutes": 0}}, **{"resource-threshold-config": "{}"})
    cmv.check(stale, stale, "koordinator-system", "slo-controller-config")  # nothing changed: passes
    other = {**bad, "metadata": {"namespace": "default", "name": "mine"}}
    cmv.check(other, None, "koordinator-system", "slo-controller-config")  # not the config: passes


def quota(
    name: str, mn: dict[str, str], mx: dict[str, str], parent: str = "", is_parent: bool = False
) -> dict[str, Any]:
    labels = {}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    return {"metadata": {"name": name, "labels": labels}, "spec": {"min": mn, "max": mx}}


TREE = [
    quota("parent", {"cpu": "10", "memory": "10Gi"}, {"cpu": "20", "memory": "20Gi"}, is_parent=True),
    quota("a", {"cpu": "6", "memory": "4Gi"}, {"cpu": "20", "memory": "20Gi"}, parent="parent"),
]


@pytest.mark.parametrize(
    ("case", "new", "want"),
    [
        (
            "fits",
            quota("b", {"cpu": "4", "memory": "4Gi"}, {"cpu": "20", "memory": "20Gi"}, parent="parent"),
            "",
        ),
        (
            "brothers over the parent's min",
            quota("b", {"cpu": "5"}, {"cpu": "20", "memory": "20Gi"}, parent="parent"),
            "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: parent",
        ),
        (
            "min over max",
            quota("b", {"cpu": "30"}, {"cpu": "20", "memory": "20Gi"}, parent="parent"),
            "resourceKey cpu of quota b min 30 > max 20",
        ),
        (
            "min key not in max",
            quota("b", {"gpu": "1"}, {"cpu": "20"}),
            "resourceKey gpu of quota b is included in min, which is not included in max",
        ),
        (
            "negative max",
            quota("b", {}, {"cpu": "-1", "memory": "-1"}),
            "b quota.Spec.Max's value < 0, in dimensions :[cpu memory]",
        ),
        (
            "no such parent",
            quota("b", {}, {"cpu": "1"}, parent="nope"),
            "b has parentName nope but not find parentInfo in quotaInfoMap",
        ),
        (
            "parent not a parent",
            quota("b", {}, {"cpu": "20", "memory": "20Gi"}, parent="a"),
            "b has parentName a but the parentQuotaInfo's IsParent is false",
        ),
        (
            "max keys differ",
            quota("b", {}, {"cpu": "20"}, parent="parent"),
            "failed to check sub and parent group quotaKey, err: "
            "checkSubAndParentGroupQuotaKey failed: parent's max keys are not the same with b's",
        ),
        (
            "exists",
            quota("a", {}, {"cpu": "20", "memory": "20Gi"}, parent="parent"),
            "AddQuota quota already exist:a",
        ),
    ],
)
def test_quota_tree_checks_on_create(case: str, new: Any, want: str) -> None:
    if not want:
        qv.check("CREATE", new, None, TREE)
        return
    with pytest.raises(qv.Refused) as err:
        qv.check("CREATE", new, None, TREE)
    assert str(err.value) == want, case


def test_a_parents_min_below_its_childrens_and_deleting_a_parent() -> None:
    shrunk = quota("parent", {"cpu": "5", "memory": "10Gi"}, {"cpu": "20", "memory": "20Gi"}, is_parent=True)
    with pytest.raises(
        qv.Refused, match=r"^checkMinQuotaSum all children's MinQuota > current MinQuota, current: parent$"
    ):
        qv.check("UPDATE", shrunk, TREE[0], TREE)
    with pytest.raises(qv.Refused, match=r"^delete quota failed, quota parent has 1 child quotas$"):
        qv.check("DELETE", None, TREE[0], TREE)
    with pytest.raises(qv.Refused, match=r"^can not delete quotaGroup :koordinator-root-quota$"):
        qv.check("DELETE", None, quota("koordinator-root-quota", {}, {}), TREE)
    qv.check("DELETE", None, TREE[1], TREE)
