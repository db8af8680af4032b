"""Pod objects, kubelet ``/pods`` bodies and PodList files, fuzzed: pods come out with safe cgroup paths or
none, a bad body is the source's own error (the informer keeps its pods), a bad pod is logged once."""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordlet import api
from koordlet.statesinformer.discovery import load_pod_list
from koordlet.statesinformer.podinfo import pod_infos
from koordlet.statesinformer.pods import KubeletEndpoint, KubeletPodSource, PodsInformer
from koordlet.system.podpath import POD_UID_RE, CgroupDriver, CgroupLayout
from koordlet.testing import FakeClock
from koordlet.testing.kubelet import pod_object
from koordshared.runtime.errors import APIUnavailable
from tests.support.strategies import json_values, mutations, text_mutations

LAYOUTS = [CgroupLayout.create(CgroupDriver.CGROUPFS), CgroupLayout.create(CgroupDriver.SYSTEMD, "/k8s")]
POD = pod_object(
    "0d3c5c3e-1111-4222-8333-444455556666",
    "web-0",
    qos_class="Burstable",
    container_id="containerd://" + "ab" * 32,
    labels={"koordinator.sh/qosClass": "LS"},
    requests={"cpu": "500m", "memory": "1Gi"},
    limits={"cpu": "1", "memory": "2Gi"},
)


def check_safe(pods: list[api.PodInfo], layout: CgroupLayout) -> None:
    for p in pods:
        if p.cgroup_dir:
            assert POD_UID_RE.match(p.uid) and p.cgroup_dir == layout.pod_dir(p.uid, p.kube_qos)
        for c in p.containers:
            if c.cgroup_dir:
                assert p.cgroup_dir and c.cgroup_dir.startswith(p.cgroup_dir + "/")
                assert ".." not in c.cgroup_dir.split("/") and "\x00" not in c.cgroup_dir


@settings(max_examples=300)
@given(st.lists(mutations(POD, rounds=4) | json_values, max_size=4), st.sampled_from(LAYOUTS))
def test_pod_objects_give_pods_with_safe_paths_or_none(objects: list[Any], layout: CgroupLayout) -> None:
    items = [o for o in objects if isinstance(o, dict)]
    check_safe(pod_infos(items, layout), layout)


class _Body:
    def __init__(self) -> None:
        self.data = b""


@pytest.fixture(scope="module")
def kubelet_body() -> Iterator[tuple[_Body, KubeletPodSource]]:
    body = _Body()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body.data)))
            self.end_headers()
            self.wfile.write(body.data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    port = int(server.server_address[1])
    source = KubeletPodSource(lambda: KubeletEndpoint(insecure=True, read_only_port=port, timeout=2.0))
    try:
        yield body, source
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


GOOD_LIST = json.dumps({"kind": "PodList", "items": [POD]})


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    text_mutations(GOOD_LIST)
    | st.builds(lambda items: json.dumps({"items": items}, default=str), st.lists(json_values, max_size=3))
    | st.builds(lambda v: json.dumps(v, default=str), json_values)
    | st.text(max_size=100)
)
def test_a_kubelet_body_is_pods_or_the_sources_error(
    kubelet_body: tuple[_Body, KubeletPodSource], text: str
) -> None:
    body, source = kubelet_body
    body.data = GOOD_LIST.encode()
    informer = PodsInformer(source, lambda: LAYOUTS[0], clock=FakeClock(), staleness=20)
    assert informer.refresh() and len(informer.pods()) == 1
    body.data = text.encode("utf-8", "surrogatepass")
    try:
        check_safe(list(source.list_pods(LAYOUTS[0])), LAYOUTS[0])
    except APIUnavailable:
        pass
    kept = informer.pods()
    if not informer.refresh():
        assert informer.pods() == kept  # the last good pods stay


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    text_mutations(GOOD_LIST) | text_mutations(yaml_list := "kind: PodList\nitems:\n  - metadata: {uid: u}\n")
)
def test_a_pod_list_file_is_items_or_the_sources_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pods.json"
        path.write_text(text)
        try:
            items = load_pod_list(str(path), timeout=1.0)
        except APIUnavailable:
            return
    assert all(isinstance(i, dict) for i in items)
    check_safe(pod_infos(items, LAYOUTS[0]), LAYOUTS[0])


def test_a_bad_pod_is_logged_once_however_often_it_is_listed(caplog: pytest.LogCaptureFixture) -> None:
    bad = pod_object("../../../etc", "evil", container_id="evil://" + "a" * 64)
    caplog.set_level(logging.WARNING, "koordlet.statesinformer.podinfo")
    for _ in range(5):
        pod_infos([bad], LAYOUTS[0])
    assert len(caplog.records) == 2, [r.getMessage() for r in caplog.records]  # its UID and its container
    pod_infos([pod_object("../../../etc/2", "evil")], LAYOUTS[0])  # what is wrong changed: news
    assert len(caplog.records) == 3
