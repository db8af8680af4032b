"""Pod sources and the pods informer: kubelet over HTTP/HTTPS, kept pods on errors, staleness, kicks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from koordlet import api
from koordlet.statesinformer.kubelet import KubeletCredentials
from koordlet.statesinformer.podinfo import pod_infos, podlist_items
from koordlet.statesinformer.pods import KubeletEndpoint, KubeletPodSource, PodsInformer
from koordlet.system.podpath import CgroupDriver, CgroupLayout
from koordlet.testing import FakeClock
from koordlet.testing.kubelet import FakeKubelet, pod_object
from koordshared.runtime.errors import APIUnavailable

LAYOUT = CgroupLayout.create(CgroupDriver.CGROUPFS)


def pods(n: int) -> list[dict[str, Any]]:
    return [
        pod_object(str(uuid.UUID(int=i + 1)), f"p{i}", container_id="containerd://" + f"{i:064x}")
        for i in range(n)
    ]


@pytest.fixture
def kubelet() -> Iterator[FakeKubelet]:
    with FakeKubelet() as k:
        yield k


def insecure(k: FakeKubelet, timeout: float = 2.0) -> KubeletPodSource:
    ep = KubeletEndpoint(address="127.0.0.1", insecure=True, read_only_port=k.port, timeout=timeout)
    return KubeletPodSource(lambda: ep)


def test_kubelet_http_pods(kubelet: FakeKubelet) -> None:
    kubelet.set_pods(pods(3))
    got = insecure(kubelet).list_pods(LAYOUT)
    assert [p.name for p in got] == ["p0", "p1", "p2"]
    assert got[0].cgroup_dir == LAYOUT.pod_dir(got[0].uid, got[0].kube_qos)
    assert kubelet.auth_headers == [""]  # the read-only port gets no token


@pytest.mark.tool("openssl")
def test_kubelet_https_with_token_and_ca(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with FakeKubelet(tls_dir=tmp_path, token="s3cret") as k:
        k.set_pods(pods(2))
        creds = KubeletCredentials(token_file=str(token))
        ep = KubeletEndpoint(address="127.0.0.1", port=k.port, credentials=creds, ca_file=str(k.cert))
        got = KubeletPodSource(lambda: ep).list_pods(LAYOUT)
        assert len(got) == 2 and k.auth_headers[-1] == "Bearer s3cret"
        token.write_text("rotated")  # re-read every time: a rotated token is sent (and refused here)
        with pytest.raises(APIUnavailable, match="401"):
            KubeletPodSource(lambda: ep).list_pods(LAYOUT)


def test_kubelet_without_pods_answers_a_null_item_list(kubelet: FakeKubelet) -> None:
    # The real kubelet (a Go server) encodes no pods as "items": null: that is an empty node, not a
    # malformed answer (the agent refused it and never synced its pods on a real node).
    kubelet.mode = "empty"
    assert insecure(kubelet).list_pods(LAYOUT) == []
    assert podlist_items({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": None}) == []
    assert podlist_items({"kind": "Status", "items": None}) is None
    assert podlist_items({"kind": "PodList"}) is None
    assert podlist_items({"kind": "PodList", "items": {}}) is None


@pytest.mark.parametrize("mode", ["garbage", "401"])
def test_kubelet_failures_raise(kubelet: FakeKubelet, mode: str) -> None:
    kubelet.mode = mode
    with pytest.raises(APIUnavailable):
        insecure(kubelet).list_pods(LAYOUT)


def test_kubelet_timeout(kubelet: FakeKubelet) -> None:
    kubelet.mode = "slow"
    with pytest.raises(APIUnavailable):
        insecure(kubelet, timeout=0.3).list_pods(LAYOUT)


class ListSource:
    trust_empty = False
    kick_rate, kick_burst = 5.0, 10

    def __init__(self) -> None:
        self.answer: Sequence[Mapping[str, Any]] | None = []

    def list_pods(self, layout: CgroupLayout | None) -> Sequence[api.PodInfo]:
        if self.answer is None:
            raise APIUnavailable("down")
        return pod_infos(self.answer, layout)


def test_informer_keeps_old_pods_and_degrades(fake_clock: FakeClock) -> None:
    src = ListSource()
    changes: list[int] = []
    inf = PodsInformer(
        src, lambda: LAYOUT, clock=fake_clock, staleness=20, on_change=lambda: changes.append(1)
    )
    assert not inf.has_synced()
    src.answer = pods(2)
    assert inf.refresh() and inf.has_synced() and len(inf.pods()) == 2 and changes == [1]
    first = inf.pods()
    assert inf.refresh() and changes == [1]  # same pods: no event
    assert inf.pods() is first  # and the same snapshot object, so readers can skip work by identity
    src.answer = []  # kubelet restarting
    assert not inf.refresh()
    assert len(inf.pods()) == 2
    src.answer = None  # kubelet down
    fake_clock.advance(15)
    assert not inf.refresh() and not inf.degraded()
    fake_clock.advance(10)
    assert inf.degraded() and inf.has_synced() and len(inf.pods()) == 2
    src.answer = pods(1)
    assert inf.refresh() and not inf.degraded() and len(inf.pods()) == 1 and changes == [1, 1]
    p = inf.pods()[0]
    assert p.qos is api.QOSClass.BE and p.cgroup_dir.startswith("kubepods/besteffort/pod")


def test_informer_degraded_before_first_sync(fake_clock: FakeClock) -> None:
    src = ListSource()
    src.answer = None
    inf = PodsInformer(src, lambda: LAYOUT, clock=fake_clock, staleness=5)
    inf.refresh()
    fake_clock.advance(6)
    assert inf.degraded() and not inf.has_synced()


def test_kick_is_rate_limited(fake_clock: FakeClock) -> None:
    src = ListSource()
    src.answer = pods(1)
    calls: list[int] = []
    inf = PodsInformer(
        src, lambda: LAYOUT, clock=fake_clock, staleness=5, on_refresh=lambda ok, n: calls.append(n)
    )
    ran = sum(inf.kick() for _ in range(50))
    assert ran == 10  # burst 10
    fake_clock.advance(1.0)
    assert sum(inf.kick() for _ in range(50)) == 5  # then 5 per second
    assert len(calls) == 15
    # a refused kick is not lost: retry says when a token comes and runs it then
    wait = inf.retry()
    assert wait is not None and 0 < wait <= 0.2
    fake_clock.advance(wait)
    assert inf.retry() is None and len(calls) == 16
    assert inf.retry() is None and len(calls) == 16  # nothing pending any more
