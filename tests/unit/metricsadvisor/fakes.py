"""Small fakes at the metrics advisor's boundaries: states, error sink, event bus, process source."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from koordlet import api
from koordlet.metricsadvisor.hostapp import ProcSample


class FakeStates:
    """``api.StatesReader`` over lists the test sets."""

    def __init__(self, pods: Sequence[api.PodInfo] = (), slo: api.NodeSLO | None = None) -> None:
        self._pods = list(pods)
        self._slo = slo or api.NodeSLO()

    def set_pods(self, pods: Sequence[api.PodInfo]) -> None:
        self._pods = list(pods)

    def set_slo(self, slo: api.NodeSLO) -> None:
        self._slo = slo

    def node(self) -> api.NodeInfo | None:
        return None

    def pods(self) -> Sequence[api.PodInfo]:
        return list(self._pods)

    def node_slo(self) -> api.NodeSLO:
        return self._slo

    def has_synced(self) -> bool:
        return True


class RecordingErrors:
    """``ErrorSink`` that counts by (collector, kind)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def error(self, collector: str, kind: str, n: int = 1) -> None:
        self.counts[(collector, kind)] += n

    def kind(self, kind: str) -> int:
        return sum(n for (_, k), n in self.counts.items() if k == kind)


class RecordingBus:
    def __init__(self) -> None:
        self.events: list[str] = []

    def publish(self, event: str) -> None:
        self.events.append(event)


class FakeProcesses:
    """``ProcessSource`` returning whatever the test put in ``procs``."""

    def __init__(self) -> None:
        self.procs: list[ProcSample] = []

    def by_name(self, names: frozenset[str]) -> Sequence[ProcSample]:
        return [p for p in self.procs if p.name in names]


def uid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{n:012x}"


def cid(n: int) -> str:
    return f"{n:064x}"


def pod(
    n: int,
    *,
    qos: api.KubeQOSClass = api.KubeQOSClass.BESTEFFORT,
    containers: Sequence[int] = (),
    batch_cpu_milli: int = 0,
    name: str = "",
) -> api.PodInfo:
    kq = {
        api.KubeQOSClass.BESTEFFORT: api.QOSClass.BE,
        api.KubeQOSClass.BURSTABLE: api.QOSClass.LS,
        api.KubeQOSClass.GUARANTEED: api.QOSClass.LSR,
    }[qos]
    return api.PodInfo(
        uid=uid(n),
        namespace="default",
        name=name or f"pod-{n}",
        qos=kq,
        kube_qos=qos,
        containers=tuple(
            api.ContainerInfo(
                name=f"c{c}",
                container_id=cid(c),
                runtime="containerd",
                batch_cpu_request_milli=batch_cpu_milli,
            )
            for c in containers
        ),
    )
