"""ElasticQuota's controllers: the status writer (the annotations and ``status.used`` Koordinator writes, in
one merge patch, only when a figure changed; the built-in quotas created when missing) and the over-use
revoke (off by default; after ``delayEvictTime`` the least important preemptible pods go, those that fit
back stay)."""

from __future__ import annotations

import json
from typing import Any

from koord.scheduler.plugins.elasticquota import NAME, ElasticQuota
from koord.scheduler.plugins.elasticquota.revoke import RevokeController
from koord.scheduler.plugins.elasticquota.status import StatusController, status_patch
from koord.scheduler.testing import MemoryScheduler
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing import node, pod
from koordshared.testing.objects import elastic_quota

S = "koord-scheduler"


def kit(args: dict[str, Any] | None = None) -> tuple[MemoryScheduler, ElasticQuota]:
    profile: dict[str, Any] = {"schedulerName": S, "plugins": {"multiPoint": {"enabled": [{"name": NAME}]}}}
    if args is not None:
        profile["pluginConfig"] = [{"name": NAME, "args": args}]
    k = MemoryScheduler({"profiles": [profile]})
    plugin: ElasticQuota = k.scheduler.profiles[S].instances[NAME]
    return k, plugin


def placed(name: str, quota: str, cpu: str, *, priority: int = 0, **kw: Any) -> dict[str, Any]:
    labels = {eq.LABEL_QUOTA_NAME: quota, **kw.pop("labels", {})}
    return pod(name, requests={"cpu": cpu}, labels=labels, node_name="n", priority=priority, **kw)


def test_the_status_writer_writes_koordinators_figures_once() -> None:
    k, plugin = kit()
    (writer,) = plugin.new_controllers()
    assert isinstance(writer, StatusController) and (writer.name, writer.period) == (
        "ElasticQuotaController",
        1.0,
    )
    k.add_node(node("n", "8", "32Gi"))
    quotas = k.informers["elasticquotas"]
    quotas.put(elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8", "memory": "8Gi"}))
    k.add_pod(placed("p0", "a", "1", labels={eq.LABEL_PREEMPTIBLE: "false"}))
    k.add_pod(pod("p1", requests={"cpu": "2"}, labels={eq.LABEL_QUOTA_NAME: "a"}))  # pending
    writer.sync()
    ((plural, ns, _, patch),) = [p for p in k.api.object_patches if p[2] == "a"]
    assert (plural, ns) == ("elasticquotas", "default")
    assert patch == {
        "metadata": {
            "annotations": {
                eq.ANNOTATION_RUNTIME: '{"cpu":"3","memory":"0"}',
                eq.ANNOTATION_REQUEST: '{"cpu":"3"}',
                eq.ANNOTATION_CHILD_REQUEST: '{"cpu":"3"}',
                eq.ANNOTATION_NON_PREEMPTIBLE_REQUEST: '{"cpu":"1"}',
                eq.ANNOTATION_NON_PREEMPTIBLE_USED: '{"cpu":"1"}',
            }
        },
        "status": {"used": {"cpu": "1"}},
    }
    # The object as patched: nothing more to write.
    written = elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8", "memory": "8Gi"})
    written["metadata"]["annotations"] = patch["metadata"]["annotations"]
    written["status"] = {"used": {"cpu": "1000m"}}  # the same figure spelt otherwise
    quotas.put(written)
    before = len(k.api.object_patches)
    writer.sync()
    assert [p for p in k.api.object_patches[before:] if p[2] == "a"] == []


def test_a_used_resource_that_is_gone_is_removed_from_the_status() -> None:
    k, plugin = kit()
    quota = elastic_quota("a", maximum={"cpu": "8"})
    quota["status"] = {"used": {"cpu": "2", "nvidia.com/gpu": "1"}}
    k.informers["elasticquotas"].put(quota)
    k.add_pod(placed("p", "a", "2"))
    summary = plugin.ledger.summary("a")
    assert summary is not None
    patch = status_patch(quota, summary)
    assert patch is not None and patch["status"] == {"used": {"cpu": "2", "nvidia.com/gpu": None}}


def test_the_built_in_quotas_are_created_in_the_quota_group_namespace() -> None:
    k, plugin = kit({"quotaGroupNamespace": "quotas", "defaultQuotaGroupMax": {"cpu": "10", "memory": "1Gi"}})
    k.informers["elasticquotas"].put(elastic_quota(eq.SYSTEM_QUOTA, namespace="quotas"))
    (writer,) = plugin.new_controllers()
    writer.sync()
    created = {name: obj for (_, ns, name), obj in k.api.objects.items() if ns == "quotas"}
    assert sorted(created) == [eq.DEFAULT_QUOTA, eq.ROOT_QUOTA]  # the system quota exists already
    assert created[eq.DEFAULT_QUOTA]["spec"] == {"max": {"cpu": "10", "memory": "1Gi"}}
    assert created[eq.ROOT_QUOTA]["metadata"]["labels"] == {
        eq.LABEL_IS_PARENT: "true",
        eq.LABEL_ALLOW_LENT_RESOURCE: "false",
        eq.LABEL_PARENT: "",
    }
    writer.sync()  # done once
    assert len([key for key in k.api.objects if key[1] == "quotas"]) == 2


def test_the_status_writer_annotations_are_json_resource_lists() -> None:
    k, plugin = kit()
    k.add_node(node("n", "8", "32Gi"))
    k.informers["elasticquotas"].put(elastic_quota("a", maximum={"cpu": "1500m", "memory": "3Gi"}))
    k.add_pod(
        pod("p", requests={"cpu": "1500m", "memory": "3Gi"}, labels={eq.LABEL_QUOTA_NAME: "a"}, node_name="n")
    )
    (writer,) = plugin.new_controllers()
    writer.sync()
    ((*_, patch),) = [p for p in k.api.object_patches if p[2] == "a"]
    runtime = json.loads(patch["metadata"]["annotations"][eq.ANNOTATION_RUNTIME])
    assert runtime == {"cpu": "1500m", "memory": "3Gi"}


# ---- over-use revoke -----------------------------------------------------------------------------


def over_used(args: dict[str, Any]) -> tuple[MemoryScheduler, ElasticQuota]:
    """Quota a (min 2) holds 5 cpu in pods placed by another scheduler while b (min 6, lending nothing)
    keeps 6 of the 8: a's runtime is 2."""
    k, plugin = kit(args)
    k.add_node(node("n", "8", "32Gi"))
    quotas = k.informers["elasticquotas"]
    quotas.put(elastic_quota("a", minimum={"cpu": "2"}, maximum={"cpu": "8"}))
    quotas.put(elastic_quota("b", minimum={"cpu": "6"}, maximum={"cpu": "8"}, lends=False))
    k.add_pod(placed("low", "a", "1", priority=1))
    k.add_pod(placed("low-fixed", "a", "1", priority=1, labels={eq.LABEL_PREEMPTIBLE: "false"}))
    k.add_pod(placed("mid", "a", "1", priority=5))
    k.add_pod(placed("high", "a", "2", priority=9))
    return k, plugin


def test_the_revoke_is_off_by_default() -> None:
    _, plugin = over_used({})
    assert [c.name for c in plugin.new_controllers()] == ["ElasticQuotaController"]
    _, plugin = over_used({"monitorAllQuotas": True, "enableRuntimeQuota": False})
    assert [c.name for c in plugin.new_controllers()] == ["ElasticQuotaController"]


def test_an_over_used_quota_gives_back_its_least_important_pods_after_the_delay() -> None:
    k, plugin = over_used({"monitorAllQuotas": True, "delayEvictTime": "60s", "revokePodInterval": "2s"})
    revoke = plugin.new_controllers()[1]
    assert isinstance(revoke, RevokeController) and (revoke.name, revoke.period) == (
        "QuotaOverUsedRevokeController",
        2.0,
    )
    assert plugin.ledger.runtime("a") == {"cpu": 2000} and plugin.ledger.usage("a").used == {"cpu": 5000}
    revoke.sync()
    k.clock.advance(60)
    revoke.sync()
    assert k.api.evicted == []  # not longer than the delay yet
    k.clock.advance(1)
    revoke.sync()
    # Used 5, runtime 2. Least important first: low (1) -> 4, low-fixed is never taken, mid (1) -> 3,
    # high (2) -> 1. Then back from the most important: high does not fit (3 > 2), mid does (2).
    assert sorted(k.api.evicted) == ["default/high", "default/low"]


def test_a_quota_that_fits_again_is_not_revoked() -> None:
    k, plugin = over_used({"monitorAllQuotas": True})
    revoke = plugin.new_controllers()[1]
    revoke.sync()
    k.clock.advance(100)
    revoke.sync()
    # b lends again: a borrows up to its request, 5, which is what it uses.
    k.informers["elasticquotas"].put(elastic_quota("b", minimum={"cpu": "6"}, maximum={"cpu": "8"}))
    k.clock.advance(100)
    revoke.sync()
    assert k.api.evicted == []
