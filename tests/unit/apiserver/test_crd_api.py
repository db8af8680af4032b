"""CRDs registered through the API (client and kubectl), as a deploy step would do it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import crdschema
from tests.apiserver.fixtures import CRD_DIR, NODESLO_CRD
from tests.unit.apiserver.helpers import GROUP, VERSION, clients
from tests.unit.apiserver.test_crdschema import NODESLO


def test_crd_created_through_the_client_is_served(api_server_factory: Any) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    server = api_server_factory(crds=())
    _, co = clients(server)
    with pytest.raises(ApiException) as err:
        co.list_cluster_custom_object(GROUP, VERSION, "nodeslos")
    assert err.value.status == 404
    ext: Any = client.ApiextensionsV1Api(client.ApiClient(server.client_config()))
    created = ext.create_custom_resource_definition(crdschema.load_crd(NODESLO_CRD))
    assert created.metadata.name == "nodeslos.slo.koordinator.sh"
    assert {c.type for c in created.status.conditions} == {"Established", "NamesAccepted"}
    co.create_cluster_custom_object(GROUP, VERSION, "nodeslos", NODESLO)
    assert co.get_cluster_custom_object(GROUP, VERSION, "nodeslos", "node-1")["spec"] == NODESLO["spec"]
    too_much = {"cpuBurstStrategy": {"cpuBurstPercent": 10001}}  # Koordinator's maximum is 10000
    bad = {**NODESLO, "metadata": {"name": "node-2"}, "spec": too_much}
    with pytest.raises(ApiException) as err:
        co.create_cluster_custom_object(GROUP, VERSION, "nodeslos", bad)
    assert err.value.status == 422
    ext.delete_custom_resource_definition("nodeslos.slo.koordinator.sh")
    with pytest.raises(ApiException) as err:
        co.list_cluster_custom_object(GROUP, VERSION, "nodeslos")
    assert err.value.status == 404


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    if args[0] == "apply":  # the test server publishes no OpenAPI document for client-side validation
        args = (*args, "--validate=false")
    return subprocess.run(
        ["kubectl", *args], input=stdin, capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.mark.tool("kubectl")
def test_kubectl_applies_the_crds_and_a_nodeslo(api_server_factory: Any, tmp_path: Path) -> None:
    server = api_server_factory(crds=())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server.url}}],
                "users": [{"name": "test", "user": {}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    done = _kubectl(kubeconfig, "apply", "-f", str(CRD_DIR))
    assert done.returncode == 0, done.stderr
    listed = _kubectl(kubeconfig, "get", "crd", "-o", "name")
    assert sorted(listed.stdout.split()) == [
        "customresourcedefinition.apiextensions.k8s.io/nodemetrics.slo.koordinator.sh",
        "customresourcedefinition.apiextensions.k8s.io/noderesourcetopologies.topology.node.k8s.io",
        "customresourcedefinition.apiextensions.k8s.io/nodeslos.slo.koordinator.sh",
    ]
    done = _kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(NODESLO))
    assert done.returncode == 0, done.stderr
    got = json.loads(_kubectl(kubeconfig, "get", "nodeslo", "node-1", "-o", "json").stdout)
    assert got["spec"]["cpuBurstStrategy"] == NODESLO["spec"]["cpuBurstStrategy"]
    changed = json.loads(json.dumps(NODESLO))
    changed["spec"]["cpuBurstStrategy"]["cpuBurstPercent"] = 500
    done = _kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(changed))
    assert done.returncode == 0, done.stderr
    assert server.store.get("nodeslos", "node-1")["spec"]["cpuBurstStrategy"]["cpuBurstPercent"] == 500
    changed["spec"]["resourceQOSStrategy"]["lsrClass"]["memoryQOS"] = {"wmarkRatio": 101}
    done = _kubectl(kubeconfig, "apply", "-f", "-", stdin=json.dumps(changed))
    assert done.returncode != 0 and "wmarkRatio" in done.stderr
