"""PersistentVolumeClaims, PersistentVolumes and StorageClasses through the official client, and the list
calls koord-scheduler's VolumeBinding caches make for them."""

from __future__ import annotations

import functools

from kubernetes import client

from koordshared.apis.meta import groups
from koordshared.kube.client import call
from koordshared.kube.informers import Watch, list_call
from tests.apiserver import APIServer
from tests.unit.apiserver.helpers import api_client


def test_storage_objects_round_trip_and_list_as_the_caches_list_them(api_server: APIServer) -> None:
    api = api_client(api_server)
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    # (manifests as dicts: the typed methods' validate_call builds the model, their annotations say only that)
    local = {"metadata": {"name": "local"}, "provisioner": "x", "volumeBindingMode": "WaitForFirstConsumer"}
    storage.create_storage_class(local)  # type: ignore[arg-type]
    volume = {
        "metadata": {"name": "v"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/x"},
        },
    }
    core.create_persistent_volume(volume)  # type: ignore[arg-type]
    claim_body = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim("default", claim_body)  # type: ignore[arg-type]
    core.patch_namespaced_persistent_volume_claim_status("data", "default", {"status": {"phase": "Bound"}})
    found = {}
    for name, resource in (("pvcs", groups.PVCS), ("pvs", groups.PVS), ("classes", groups.STORAGE_CLASSES)):
        fn, kwargs = list_call(api, Watch(name, resource))
        listed = call(name, functools.partial(fn, **kwargs))
        found[name] = [item["metadata"]["name"] for item in listed["items"]]
    assert found == {"pvcs": ["data"], "pvs": ["v"], "classes": ["local"]}
    claim = core.read_namespaced_persistent_volume_claim("data", "default")
    assert claim.status is not None and claim.status.phase == "Bound"
