"""The lean transport under ``request``: the official client's credentials and headers over TLS with RBAC
on, one kept-alive connection for a run of requests, a connection the server closed while idle replaced,
an error answer mapped as the generated client's, and the configurations it leaves to the generated
client."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from koordshared.kube.client import ApiError, close_client, make_api_client, request
from koordshared.kube.transport import Transport, transport_of
from tests.apiserver import APIServer
from tests.apiserver.fixtures import api_server, api_server_factory  # noqa: F401

NS = "/api/v1/namespaces/default"


def test_over_tls_as_the_admin_and_as_a_service_account_on_one_connection(
    api_server_factory: Callable[..., APIServer],  # noqa: F811
) -> None:
    server = api_server_factory(tls=True, authorization=True)
    request(
        make_api_client(client_configuration=server.client_config()),
        "sa",
        "POST",
        f"{NS}/serviceaccounts",
        body={"metadata": {"name": "sched"}},
    )
    admin = make_api_client(client_configuration=server.client_config(), user_agent="lean/1")
    for _ in range(5):
        assert request(admin, "get", "GET", NS)["metadata"]["name"] == "default"
    transport = transport_of(admin)
    assert isinstance(transport, Transport) and transport.tls
    assert len(transport._idle) == 1  # five requests, one connection kept alive
    assert {r.headers.get("User-Agent") for r in server.requests if r.path == NS} == {"lean/1"}

    nobody = make_api_client(client_configuration=server.client_config("default/sched"))
    with pytest.raises(ApiError) as err:
        request(nobody, "nodes", "GET", "/api/v1/nodes")
    assert err.value.status == 403  # its own token went, not the admin's
    close_client(admin)
    close_client(nobody)


def test_a_connection_the_server_closed_while_idle_is_replaced(api_server: APIServer) -> None:  # noqa: F811
    client = make_api_client(client_configuration=api_server.client_config())
    request(client, "get", "GET", NS)
    transport = transport_of(client)
    assert transport is not None
    (idle,) = transport._idle
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)  # as a server closing an idle keep-alive connection looks
    assert request(client, "get", "GET", NS)["metadata"]["name"] == "default"
    assert transport._idle and transport._idle[0] is not idle
    with pytest.raises(ApiError) as err:
        request(client, "get", "GET", "/api/v1/namespaces/nope")
    assert err.value.not_found and "nope" in str(err.value)
    close_client(client)


def test_proxies_and_server_name_overrides_stay_with_the_generated_client(
    api_server: APIServer,  # noqa: F811
) -> None:
    for field, value in (("proxy", "http://127.0.0.1:1"), ("tls_server_name", "kubernetes")):
        config = api_server.client_config()
        setattr(config, field, value)
        client = make_api_client(client_configuration=config)
        assert transport_of(client) is None
        client.close()
