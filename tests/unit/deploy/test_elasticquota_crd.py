"""deploy/scheduler/crds: the ElasticQuota CRD is its generator's output, has Koordinator's shape
(namespaced, no status subresource), and accepts what users and koord-scheduler write: a quota with the
tree's labels and annotations, the built-in quotas the plugin creates, its status patch."""

from __future__ import annotations

from koord.scheduler.plugins.elasticquota.args import DEFAULT_GROUP_MAX
from koord.scheduler.plugins.elasticquota.quotas import built_in_object
from koordshared.apis.extension import elasticquota as eq
from koordshared.testing.objects import elastic_quota
from tests import crdschema
from tests.support.paths import ROOT

CRDS = ROOT / "deploy" / "scheduler" / "crds"
CRD = CRDS / "scheduling.sigs.k8s.io_elasticquotas.yaml"


def test_koordinators_shape() -> None:
    doc = crdschema.load_crd(CRD)
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "elasticquotas.scheduling.sigs.k8s.io"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "scheduling.sigs.k8s.io",
        "Namespaced",
        "ElasticQuota",
    )
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and "subresources" not in version  # status is patched in place


def test_what_users_and_the_scheduler_write_is_valid() -> None:
    quota = elastic_quota(
        "team-a",
        minimum={"cpu": "10", "memory": "20Gi"},
        maximum={"cpu": "40", "memory": "80Gi"},
        parent="org",
        lends=False,
        annotations={eq.ANNOTATION_SHARED_WEIGHT: '{"cpu":"1"}', eq.ANNOTATION_NAMESPACES: '["a","b"]'},
    )
    quota["spec"]["max"]["nvidia.com/gpu"] = 4  # a count, as users write it: a number
    quota["status"] = {"used": {"cpu": "1500m", "memory": "3Gi"}}
    assert crdschema.errors(quota, CRD) == []
    for name in eq.BUILT_IN:
        assert crdschema.errors(built_in_object(name, "koordinator-system", DEFAULT_GROUP_MAX), CRD) == []
    bad = elastic_quota("x", maximum={"cpu": "lots"})
    assert crdschema.errors(bad, CRD) != []
