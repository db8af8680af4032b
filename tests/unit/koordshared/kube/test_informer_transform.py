"""The informer's ``transform``: objects are trimmed before they are cached, on the list and on every
watch event (the scheduler extender keeps 100 000 pods this way)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koordshared.kube.informer import Informer, without_managed_fields
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401
from tests.unit.koordshared.kube.test_informer import Recorder, pod, running, wait  # noqa: F401


def trim(obj: Any) -> Any:
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "metadata": meta, "trimmed": True}


def test_transform_applies_to_list_and_watch(
    api_server: APIServer,  # noqa: F811
    running: Callable[..., Informer],  # noqa: F811
) -> None:
    heavy = pod("p0", "n0")
    heavy["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    api_server.store.create("pods", heavy)
    rec = Recorder()
    pods = running("pods", rec, transform=trim)
    wait(pods.has_synced)
    listed = pods.get("default/p0")
    assert listed is not None and listed["trimmed"] and "managedFields" not in listed["metadata"]

    api_server.store.create("pods", {**pod("p1", "n0"), "metadata": {**heavy["metadata"], "name": "p1"}})
    wait(lambda: pods.get("default/p1") is not None)
    watched = pods.get("default/p1")
    assert watched is not None and watched["trimmed"] and "managedFields" not in watched["metadata"]
    assert sorted(o["metadata"]["name"] for o in pods.by_index("node", "n0")) == ["p0", "p1"]


def test_without_managed_fields_trims_only_that_and_never_mutates() -> None:
    plain = pod("p", "n")
    assert without_managed_fields(plain) is plain  # nothing to trim: no copy
    heavy = {**plain, "metadata": {**plain["metadata"], "managedFields": [{"manager": "kubectl"}]}}
    out = without_managed_fields(heavy)
    assert out["metadata"] == plain["metadata"] and out["spec"] is plain["spec"]
    assert heavy["metadata"]["managedFields"] == [{"manager": "kubectl"}]  # the input is left as it was
