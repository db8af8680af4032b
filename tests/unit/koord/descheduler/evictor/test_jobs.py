"""PodMigrationJobs against the test API server (with the PodMigrationJob and Reservation CRDs), on a fake
clock, the controller's loop run tick by tick: a LowNodeLoad move with ReservationFirst (the Reservation
first, then the eviction, then the replacement bound to it), EvictDirectly, the arbitration limits over 50
queued moves, the failure paths (timeout, the same node, a pod that may not move, a missing pod), the
scavenger, and the events of each step. koord-scheduler and the ReplicaSet controller are played by the
test (it places the Reservation and binds the replacement through the store)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from koord.descheduler.app import Descheduler
from koordshared.apis.core.pod import condition, condition_true
from koordshared.apis.meta.quantity import format_time
from koordshared.apis.scheduling import podmigrationjob as pmj
from koordshared.kube.client import make_api_client
from koordshared.testing import FakeClock, objects
from tests.apiserver import APIServer
from tests.apiserver.fixtures import DEFAULT_CRDS, api_server_factory  # noqa: F401
from tests.cluster.deschedulerharness import hot_node_config as config
from tests.cluster.deschedulerharness import running_descheduler
from tests.cluster.reporter import FakeReporter
from tests.support.paths import ROOT

PMJ_CRD = ROOT / "deploy" / "descheduler" / "crds" / "scheduling.koordinator.sh_podmigrationjobs.yaml"
RESERVATION_CRD = ROOT / "deploy" / "scheduler" / "crds" / "scheduling.koordinator.sh_reservations.yaml"
JOBS = "podmigrationjobs.scheduling.koordinator.sh"
RESERVATIONS = "reservations.scheduling.koordinator.sh"
KOORD = "koord-scheduler"


def owned_pod(
    name: str, node: str, workload: str, *, ns: str = "default", scheduler: str = KOORD
) -> dict[str, Any]:
    p = objects.pod(
        name,
        namespace=ns,
        node_name=node,
        phase="Running",
        requests={"cpu": "100m"},
        scheduler_name=scheduler,
        labels={"app": workload},
    )
    p["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": workload,
            "uid": f"{ns}-{workload}",
            "controller": True,
        }
    ]
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return p


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_start=time.time())


@pytest.fixture
def server(clock: FakeClock) -> Iterator[APIServer]:
    with APIServer(crds=(*DEFAULT_CRDS, PMJ_CRD, RESERVATION_CRD), kubelet_auto_confirm=True) as s:
        s.store.clock = clock.wall
        yield s


def populate(server: APIServer, pods: int = 10, *, scheduler: str = KOORD, workloads: int = 2) -> None:
    """hot: 10 cores, ``pods`` Running pods of 100m in ``workloads`` ReplicaSets; two cold nodes."""
    store = server.store
    store.create("nodes", objects.node("hot", cpu="10", memory="100Gi"))
    for name in ("cold-1", "cold-2"):
        store.create("nodes", objects.node(name, cpu="1000", memory="1000Gi"))
    reported = []
    for i in range(pods):
        p = owned_pod(f"be-{i:03d}", "hot", f"rs-{i % workloads}", scheduler=scheduler)
        p["metadata"]["creationTimestamp"] = format_time(1_700_000_000 + i)
        store.create("pods", p)
        reported.append(("default", p["metadata"]["name"], 100, 0, ""))
    reporter = FakeReporter(make_api_client(client_configuration=server.client_config()))
    reporter.report("hot", 0, 0, reported)
    for name in ("cold-1", "cold-2"):
        reporter.report(name, 0, 0)


def settle(server: APIServer, app: Descheduler) -> None:
    """Wait until the descheduler's caches hold what the server holds (pods, jobs, Reservations)."""

    def versions(items: list[dict[str, Any]]) -> dict[str, str]:
        return {
            f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}": i["metadata"]["resourceVersion"]
            for i in items
        }

    deadline = time.monotonic() + 10
    for resource, cache in (("pods", "pods"), (JOBS, "podmigrationjobs"), (RESERVATIONS, "reservations")):
        while True:
            want = versions(
                [
                    p
                    for p in server.store.list(resource)[0]
                    if resource != "pods" or p["status"].get("phase") not in ("Succeeded", "Failed")
                ]
            )
            have = versions(list(app.informers[cache].objects()))
            if want == have:
                break
            assert time.monotonic() < deadline, (
                f"{cache} cache behind: {set(want.items()) ^ set(have.items())}"
            )
            time.sleep(0.005)


def controller(app: Descheduler) -> Any:
    return app.frameworks[0].plugins["MigrationController"]


def tick(server: APIServer, app: Descheduler, times: int = 1) -> None:
    for _ in range(times):
        settle(server, app)
        controller(app).tick()
    settle(server, app)


def jobs(server: APIServer) -> list[dict[str, Any]]:
    return server.store.list(JOBS)[0]


def job_events(server: APIServer, job: dict[str, Any]) -> list[tuple[str, str, str]]:
    evs = [
        e
        for e in server.store.list("events")[0]
        if e["involvedObject"].get("name") == job["metadata"]["name"]
    ]
    # In the order first observed: a series' count is patched onto its Event later (a newer resourceVersion).
    evs.sort(key=lambda e: (e.get("eventTime") or "", int(e["metadata"]["resourceVersion"])))
    return [(e["type"], e["reason"], e.get("message", "")) for e in evs]


def evictions(server: APIServer) -> list[str]:
    return [
        r.path.split("/")[-2]
        for r in server.requests
        if r.method == "POST" and r.path.endswith("/eviction") and r.status == 201
    ]


def place(server: APIServer, name: str, node: str) -> None:
    """koord-scheduler's part: the Reservation placed on ``node`` (Available)."""
    r = server.store.get(RESERVATIONS, name)
    r["status"] = {
        "phase": "Available",
        "nodeName": node,
        "allocatable": {"cpu": "100m"},
        "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
            {"type": "Ready", "status": "True", "reason": "Available"},
        ],
    }
    server.store.update(RESERVATIONS, r, subresource="status")


def bind_replacement(server: APIServer, reservation: str, node: str, name: str, *, ready: bool) -> None:
    """The ReplicaSet's new pod, placed by koord-scheduler in the Reservation (which then succeeds)."""
    p = owned_pod(name, node, "rs-0")
    p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    created = server.store.create("pods", p)
    r = server.store.get(RESERVATIONS, reservation)
    owner = {"namespace": "default", "name": name, "uid": created["metadata"]["uid"]}
    r["status"] = {**r["status"], "phase": "Succeeded", "currentOwners": [owner]}
    server.store.update(RESERVATIONS, r, subresource="status")


def test_reservation_first_places_the_reservation_then_evicts_then_binds_the_replacement(
    server: APIServer, clock: FakeClock
) -> None:
    populate(server, pods=50)
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        assert app.run_round() == "ok"
        settle(server, app)
        created = jobs(server)
        assert len(created) == 2, "50 candidates, maxMigratingPerNode 2: two jobs for the hot node"
        assert evictions(server) == []
        job = created[0]
        assert job["spec"]["mode"] == "ReservationFirst" and job["spec"]["ttl"] == "5m0s"
        assert job["metadata"]["annotations"][pmj.ANNOTATION_EVICT_TRIGGER] == "LowNodeLoad"
        assert job["metadata"]["annotations"][pmj.ANNOTATION_EVICT_REASON].startswith("node is overutilized")
        # a second round adds no job: the pods with jobs are filtered, the node is at its limit
        assert app.run_round() == "ok"
        settle(server, app)
        assert len(jobs(server)) == 2

        tick(server, app, 2)  # arbitration, then Running with a Reservation
        by_pod = {j["spec"]["podRef"]["name"]: j for j in jobs(server)}
        name = sorted(by_pod)[0]
        job = by_pod[name]
        assert job["status"]["phase"] == "Running"
        assert job["metadata"]["annotations"][pmj.ANNOTATION_PASSED_ARBITRATION] == "true"
        ref = job["spec"]["reservationOptions"]["reservationRef"]
        r = server.store.get(RESERVATIONS, ref["name"])
        workload = f"rs-{int(name[3:]) % 2}"
        assert ref["name"] == job["metadata"]["uid"] == r["metadata"]["name"]
        assert r["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        assert r["spec"]["owners"] == [
            {
                "controller": {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": workload,
                    "uid": f"default-{workload}",
                    "controller": True,
                    "namespace": "default",
                }
            }
        ]
        assert r["spec"]["allocateOnce"] is True and r["spec"]["ttl"] == "5m0s"
        tspec = r["spec"]["template"]["spec"]
        assert "nodeName" not in tspec and tspec["schedulerName"] == KOORD
        term = tspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["nodeSelectorTerms"] == [
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["hot"]}]}
        ]
        tick(server, app, 3)
        assert evictions(server) == [], "nothing is evicted while the Reservation is not placed"

        place(server, ref["name"], "cold-1")
        tick(server, app)
        job = server.store.get(JOBS, job["metadata"]["name"])
        assert job["status"]["nodeName"] == "cold-1"
        assert evictions(server) == [name], "evicted once the Reservation is Available"

        tick(server, app, 2)  # the pod is gone (the kubelet confirms at once): waiting for the replacement
        job = server.store.get(JOBS, job["metadata"]["name"])
        assert condition_true(job, "Eviction")
        assert job["status"]["reason"] == "WaitForPodBindReservation"

        bind_replacement(server, ref["name"], "cold-1", "be-new", ready=False)
        tick(server, app)
        job = server.store.get(JOBS, job["metadata"]["name"])
        assert job["status"]["podRef"]["name"] == "be-new" and job["status"]["phase"] == "Running"
        assert job["status"]["reason"] == "WaitForBoundPodReady"
        p = server.store.get("pods", "be-new", "default")
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        server.store.update("pods", p, subresource="status")
        tick(server, app)
        app.events.flush()
        job = server.store.get(JOBS, job["metadata"]["name"])
    assert job["status"]["phase"] == "Succeeded" and job["status"]["status"] == "Complete"
    msg = f'Bind Pod "default/be-new" in Reservation "{ref["name"]}"'
    assert job["status"]["message"] == msg
    assert [(t, reason) for t, reason, _ in job_events(server, job)] == [
        ("Normal", "ReservationCreated"),
        ("Normal", "ReservationScheduled"),
        ("Normal", "Evicting"),
        ("Normal", "EvictComplete"),
        ("Normal", "WaitForPodBindReservation"),
        ("Normal", "PodBoundReservation"),
        ("Normal", "WaitForBoundPodReady"),
        ("Normal", "BoundPodReady"),
        ("Normal", "Complete"),
    ]
    notes = dict((r, n) for _, r, n in job_events(server, job))
    assert notes["ReservationScheduled"] == f'Assigned Reservation "{ref["name"]}" to node "cold-1"'
    assert notes["Evicting"].startswith(
        f'Pod "default/{name}" evicted from node "hot" by the reason "node is'
    )
    events = server.store.list("events")[0]
    descheduled = [e for e in events if e["reason"] == "Descheduled" and e["involvedObject"]["name"] == name]
    assert len(descheduled) == 1 and descheduled[0]["involvedObject"]["kind"] == "Pod"
    about_jobs = [e for e in events if e["involvedObject"]["kind"] == "PodMigrationJob"]
    assert {e["action"] for e in about_jobs} == {"Migrating"}
    assert {e["involvedObject"]["apiVersion"] for e in about_jobs} == {"scheduling.koordinator.sh/v1alpha1"}


def user_job(server: APIServer, name: str, pod: str, *, mode: str = "EvictDirectly", ttl: str = "5m") -> None:
    """A job as a user writes it (no UID in its podRef, no creator)."""
    server.store.create(
        JOBS,
        {
            "apiVersion": pmj.API_VERSION,
            "kind": pmj.KIND,
            "metadata": {"name": name},
            "spec": {"podRef": {"namespace": "default", "name": pod}, "mode": mode, "ttl": ttl},
        },
    )


def test_an_unplaced_reservation_is_reported_and_released_when_the_job_times_out(
    server: APIServer, clock: FakeClock
) -> None:
    populate(server, pods=4)
    user_job(server, "move-1", "be-000", mode="ReservationFirst")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        tick(server, app, 2)
        job = server.store.get(JOBS, "move-1")
        assert (
            job["spec"]["podRef"]["uid"] == server.store.get("pods", "be-000", "default")["metadata"]["uid"]
        )
        rname = job["spec"]["reservationOptions"]["reservationRef"]["name"]
        # koord-scheduler cannot place it: the job says why and waits
        r = server.store.get(RESERVATIONS, rname)
        r["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                }
            ],
        }
        server.store.update(RESERVATIONS, r, subresource="status")
        tick(server, app, 3)
        job = server.store.get(JOBS, "move-1")
        assert job["status"]["phase"] == "Running"
        cond = condition(job, "ReservationScheduled")
        assert (
            cond is not None
            and cond["reason"] == "Unschedulable"
            and cond["message"] == "0/3 nodes are available"
        )
        clock.advance(301)
        tick(server, app)
        app.events.flush()
        job = server.store.get(JOBS, "move-1")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "Timeout")
    assert job["status"]["message"] == "Abort job caused by timeout"
    assert not server.store.exists(RESERVATIONS, rname), "the Reservation is released"
    assert evictions(server) == []
    assert [(t, r) for t, r, _ in job_events(server, job)] == [
        ("Normal", "ReservationCreated"),
        ("Warning", "Unschedulable"),
        ("Warning", "Timeout"),
    ]


def test_a_reservation_on_the_pods_own_node_fails_the_job_and_is_deleted(
    server: APIServer, clock: FakeClock
) -> None:
    populate(server, pods=4)
    user_job(server, "move-1", "be-000", mode="ReservationFirst")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        tick(server, app, 2)
        rname = server.store.get(JOBS, "move-1")["spec"]["reservationOptions"]["reservationRef"]["name"]
        place(server, rname, "hot")
        tick(server, app)
        job = server.store.get(JOBS, "move-1")
    assert (job["status"]["phase"], job["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert "on the same node as the Pod" in job["status"]["message"]
    assert not server.store.exists(RESERVATIONS, rname)
    assert evictions(server) == []


def test_evict_directly_and_the_arbitration_limits_hold_over_50_queued_moves(
    server: APIServer, clock: FakeClock
) -> None:
    """50 jobs at once over 5 nodes, 2 namespaces and 10 workloads of 5: never more under way than the
    limits allow, and every pod moved in the end."""
    store = server.store
    store.create("namespaces", {"metadata": {"name": "team-b"}}, keep_status=False)
    nodes = [f"n{i}" for i in range(5)]
    for n in nodes:
        store.create("nodes", objects.node(n, cpu="100", memory="100Gi"))
    for i in range(50):
        ns = "default" if i % 2 == 0 else "team-b"
        store.create("pods", owned_pod(f"p-{i:02d}", nodes[i // 10], f"rs-{i % 10}", ns=ns))
        store.create(
            JOBS,
            {
                "apiVersion": pmj.API_VERSION,
                "kind": pmj.KIND,
                "metadata": {"name": f"move-{i:02d}"},
                "spec": {"podRef": {"namespace": ns, "name": f"p-{i:02d}"}, "mode": "EvictDirectly"},
            },
        )
    limits = {
        "maxMigratingPerNode": 2,
        "maxMigratingPerNamespace": 4,
        "maxMigratingGlobally": 6,
        "objectLimiters": {},  # no 5-minute window per workload: the limits alone pace the queue
    }
    # the kubelet does not confirm at once: a pod evicted stays Terminating until the test lets it go
    server.kubelet.auto = False
    peak = {"global": 0, "node": 0, "namespace": 0, "workload": 0}
    with running_descheduler(
        server.client_config(), config(limits), clock=clock.wall, monotonic=clock
    ) as app:
        for _ in range(200):
            tick(server, app)
            pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in store.list("pods")[0]}
            active = [
                j
                for j in jobs(server)
                if pmj.phase_of(j) == "Running" or (pmj.passed_arbitration(j) and pmj.is_active(j))
            ]
            seen: dict[str, dict[str, int]] = {"node": {}, "namespace": {}, "workload": {}}
            for j in active:
                pod = pods.get(pmj.pod_key(j))
                keys = {"namespace": j["spec"]["podRef"]["namespace"]}
                if pod is not None:
                    keys["node"] = pod["spec"]["nodeName"]
                    keys["workload"] = pod["metadata"]["ownerReferences"][0]["uid"]
                for kind, key in keys.items():
                    seen[kind][key] = seen[kind].get(key, 0) + 1
            peak["global"] = max(peak["global"], len(active))
            for kind, by in seen.items():
                peak[kind] = max(peak[kind], max(by.values(), default=0))
            for key in server.kubelet.confirm_all():  # the ReplicaSet replaces each pod gone
                ns, name = key.split("/")
                i = int(name[2:])
                store.create("pods", owned_pod(f"r-{i:02d}", nodes[(i // 10 + 1) % 5], f"rs-{i % 10}", ns=ns))
            clock.advance(1)
            if all(pmj.phase_of(j) == "Succeeded" for j in jobs(server)):
                break
    assert [pmj.name_of(j) for j in jobs(server) if pmj.phase_of(j) != "Succeeded"] == []
    assert sorted(evictions(server)) == sorted(f"p-{i:02d}" for i in range(50)), "each pod evicted once"
    # workloads of 5 replicas: Koordinator's default allows 2 migrating per workload
    assert peak["global"] == 6 and peak["node"] == 2, peak
    assert peak["namespace"] <= 4 and peak["workload"] <= 2, peak


def test_a_pod_that_may_not_move_fails_its_job_at_arbitration(server: APIServer, clock: FakeClock) -> None:
    populate(server, pods=2)
    p = server.store.get("pods", "be-001", "default")
    p["metadata"]["annotations"]["scheduling.koordinator.sh/eviction-cost"] = str(2**31 - 1)
    server.store.update("pods", p)
    user_job(server, "never", "be-001")
    user_job(server, "gone", "nobody")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        tick(server, app, 2)
        never, gone = server.store.get(JOBS, "never"), server.store.get(JOBS, "gone")
    assert (never["status"]["phase"], never["status"]["reason"]) == ("Failed", "ForbiddenMigratePod")
    assert (
        never["status"]["message"]
        == 'Pod "default/be-001" is forbidden to migrate because it does not meet the requirements'
    )
    assert (gone["status"]["phase"], gone["status"]["reason"]) == ("Failed", "MissingPod")
    assert gone["status"]["message"] == 'Abort job caused by missing Pod "default/nobody"'
    assert evictions(server) == []


def test_the_scavenger_deletes_old_jobs_and_their_reservations(server: APIServer, clock: FakeClock) -> None:
    populate(server, pods=4)
    user_job(server, "old", "be-000", mode="ReservationFirst", ttl="1m")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        tick(server, app, 2)
        rname = server.store.get(JOBS, "old")["spec"]["reservationOptions"]["reservationRef"]["name"]
        clock.advance(61)
        tick(server, app)
        assert server.store.get(JOBS, "old")["status"]["reason"] == "Timeout"
        assert not server.store.exists(RESERVATIONS, rname)
        clock.advance(298)  # 359 s old: kept (TTL + 5 minutes is 360 s)
        tick(server, app)
        assert server.store.exists(JOBS, "old")
        clock.advance(30)
        tick(server, app)
        assert server.store.exists(JOBS, "old"), "the scavenger runs once a minute"
        clock.advance(30)
        tick(server, app)
    assert not server.store.exists(JOBS, "old"), "deleted 5 minutes after its TTL"


def test_reservation_first_moves_only_pods_of_its_schedulers_and_a_dry_run_creates_no_job(
    server: APIServer, clock: FakeClock
) -> None:
    populate(server, pods=6, scheduler="default-scheduler")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        app.run_round()
        assert jobs(server) == [], "default-scheduler pods: no ReservationFirst job (schedulerNames)"
    with running_descheduler(
        server.client_config(),
        config({"schedulerNames": ["default-scheduler"], "dryRun": True}),
        clock=clock.wall,
        monotonic=clock,
    ) as app:
        app.run_round()
        assert jobs(server) == [] and evictions(server) == []
    with running_descheduler(
        server.client_config(), config({"defaultJobMode": "EvictDirectly"}), clock=clock.wall, monotonic=clock
    ) as app:
        app.run_round()
        settle(server, app)
        assert [j["spec"]["mode"] for j in jobs(server)] == ["EvictDirectly"] * 2
        tick(server, app, 3)
        assert len(evictions(server)) == 2
        assert {j["status"]["phase"] for j in jobs(server)} == {"Succeeded"}


def test_without_the_crd_or_with_jobs_off_the_pod_is_evicted_at_once(
    api_server_factory: Any,  # noqa: F811
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = api_server_factory(kubelet_auto_confirm=True)
    populate(server, pods=4)
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        app.run_round()
    assert len(evictions(server)) == 2
    assert "does not serve podmigrationjobs" in caplog.text
    with_crd = api_server_factory(crds=(*DEFAULT_CRDS, PMJ_CRD, RESERVATION_CRD), kubelet_auto_confirm=True)
    populate(with_crd, pods=4)
    with running_descheduler(
        with_crd.client_config(), config({"usePodMigrationJobs": False}), clock=clock.wall, monotonic=clock
    ) as app:
        app.run_round()
    assert len(evictions(with_crd)) == 2 and with_crd.store.list(JOBS)[0] == []


def test_the_process_works_on_jobs_between_rounds_only_while_it_leads(
    server: APIServer, clock: FakeClock
) -> None:
    populate(server, pods=4)
    user_job(server, "move-1", "be-000")
    with running_descheduler(server.client_config(), config(), clock=clock.wall, monotonic=clock) as app:
        loops = app.background()
        assert [(name, every) for name, every, _ in loops] == [("test/MigrationController", 0.5)]
        tick_loop = loops[0][2]
        settle(server, app)
        app.is_leader = lambda: False
        tick_loop()
        settle(server, app)
        assert not pmj.passed_arbitration(server.store.get(JOBS, "move-1"))
        app.is_leader = lambda: True
        tick_loop()
        settle(server, app)
        assert pmj.passed_arbitration(server.store.get(JOBS, "move-1"))
