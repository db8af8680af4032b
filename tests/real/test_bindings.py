"""Binding refusals on kube-apiserver and on the test API server, side by side: a scheduler that binds a
gated, bound or deleted pod gets the same answer from both, word for word."""

from __future__ import annotations

from koordshared.kube.client import make_api_client
from tests.apiserver import APIServer
from tests.real.bindings import refusals
from tests.real.objects import NS
from tests.realcluster.cluster import Cluster


def test_binding_refusals_are_kube_apiservers(cluster: Cluster) -> None:
    real = make_api_client(str(cluster.admin_kubeconfig), user_agent="koordlet-tests/bindings")
    try:
        on_real = refusals(real, NS)
    finally:
        real.close()
    with APIServer() as server:
        fake = make_api_client(client_configuration=server.client_config())
        try:
            on_fake = refusals(fake, NS)
        finally:
            fake.close()
    assert all(code in (400, 409) for code, _, _ in on_real.values()), on_real
    assert on_fake == on_real
