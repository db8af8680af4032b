"""The colocation loop's story, run and checked (:func:`run`), with every process and cgroup removed at the
end whatever happens (a failure, Ctrl-C).

1. The test API server, three process kubelets (nodes ``loop-a``..``loop-c``, 2 cores each), koord-manager,
   koord-scheduler (LoadAwareScheduling in its profile) and one koordlet per node come up.
2. ``loop-a`` is driven hot: an LS prod service and four BE jobs burning CPU in real cgroups; the cold
   nodes run one small LS pod each. Its NodeMetric reports the load.
3. A new pod for koord-scheduler, held by a scheduling gate while ``/debug/explain`` shows every plugin's
   verdict: ``loop-a`` is filtered out by load, the cold nodes score higher; the gate is lifted and the
   pod lands on a cold node.
4. koord-descheduler in dry run: after the anomaly count it logs what it would evict; nothing is evicted.
5. koord-descheduler for real: it evicts through the Eviction API, in Koordinator's order (free before
   batch, lower priority first, never the prod service first), until ``loop-a`` is under its threshold;
   each kubelet kills the evicted pod's processes, removes its cgroups and confirms the deletion; the
   ReplicaSet's replacements are scheduled onto the cold nodes.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from koordlet.testing.agent import http_get
from koordshared.kube.client import make_api_client, request
from tests.cluster.processkubelet import ProcessKubelet
from tests.loop import configs
from tests.loop.components import (
    AgentProc,
    Child,
    Component,
    agent,
    api_server,
    kubectl_hints,
    stop_all,
    wait_for,
    write,
)
from tests.loop.narrate import narration, strip_prefix
from tests.loop.report import Placement, Report, describe
from tests.loop.watch import Watcher

NODES = ("loop-a", "loop-b", "loop-c")
HOT = NODES[0]
BUSY = "250m"
CALM_SECONDS = 6.0
"""Three descheduling rounds (2 s) and NodeMetric reports in a row under the threshold."""
PROBE_GATE = "loop.test/explain"


class Loop:
    def __init__(self, work: Path, say: Callable[[str, str], None]) -> None:
        self.work = work
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.say = say
        self.stop = threading.Event()
        self.procs: list[Child] = []
        self.kubelets: list[ProcessKubelet] = []
        self.report = Report()
        self._desched_lines: list[str] = []
        self.api: Any = None

    # ---- narration ------------------------------------------------------------------------------------

    def follow(self, name: str, line: str) -> None:
        text = strip_prefix(line)
        if name.startswith("koord-descheduler"):
            self._desched_lines.append(text)
        if (told := narration(name, line)) is not None:
            self.say(name, told)

    # ---- the story ------------------------------------------------------------------------------------

    def run(self) -> Report:
        apiserver, kubeconfig = api_server(self.work, self.logs)
        self.procs.append(apiserver)
        self.say("api-server", apiserver.first_line)
        for line in kubectl_hints(kubeconfig):
            self.say("api-server", line)
        self.api = make_api_client(kubeconfig=str(kubeconfig))
        request(self.api, "namespace", "POST", "/api/v1/namespaces", body={"metadata": {"name": configs.NS}})
        for pc in configs.priority_classes():
            request(self.api, "priority class", "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body=pc)
        request(
            self.api,
            "slo config",
            "POST",
            f"/api/v1/namespaces/{configs.NS}/configmaps",
            body=configs.slo_controller_config(),
        )
        for node in NODES:
            k = ProcessKubelet(
                self.api,
                node,
                self.work,
                cpu=configs.CPU,
                memory=configs.MEMORY,
                on_event=functools.partial(self.say, f"kubelet {node}"),
            )
            self.kubelets.append(k)
            k.start(self.stop)
            where = f"kubepods under /{k.cgroup_parent}, /pods on :{k.port}"
            self.say(f"kubelet {node}", f"registered the node: {configs.CPU} cores, {where}")
        watcher = Watcher(self.api, self.say)
        watcher.start(self.stop)
        manager = Component(
            "koord-manager", "koord.manager", [f"--kubeconfig={kubeconfig}"], self.logs, follow=self.follow
        )
        agents = [
            agent(
                k.node,
                kubeconfig,
                self.work,
                cgroup_parent=k.cgroup_parent,
                proc_root=k.proc_root,
                kubelet_port=k.port,
            )
            for k in self.kubelets
        ]
        self.procs += [manager.proc, *agents]
        started: list[Component | AgentProc] = [manager, *agents]
        for c in started:
            wait_for(f"{c.name} ready", c.ready, 60, [c.proc if isinstance(c, Component) else c])
            self.say(c.name, "ready")
        wait_for(
            "every node's NodeMetric reported",
            lambda: all(watcher.node_cpu(n)[2] is not None for n in NODES),
            60,
            agents,
        )
        self._drive_hot(watcher)
        # koord-scheduler starts once the load is measured: its LoadAware threshold sits between what the
        # cold nodes will carry and what the hot node reports on this machine, however busy it is.
        scheduler = Component(
            configs.SCHEDULER,
            "koord.scheduler",
            [
                f"--kubeconfig={kubeconfig}",
                "--config="
                + str(
                    write(
                        self.work / "koord-scheduler.yaml",
                        configs.scheduler_config(self.report.scheduler_percent),
                    )
                ),
            ],
            self.logs,
            follow=self.follow,
        )
        self.procs.append(scheduler.proc)
        wait_for(f"{scheduler.name} ready", scheduler.ready, 60, [scheduler.proc])
        self.say(scheduler.name, "ready")
        self._probe(scheduler)
        self._dry_run(kubeconfig, watcher)
        self._deschedule(kubeconfig, watcher)
        self.report.events = len(watcher.events)
        return self.report

    def _live(self) -> list[Child]:
        """The processes that must be running now (the dry-run descheduler is stopped on purpose)."""
        return [p for p in self.procs if p.name != "koord-descheduler-dry-run"]

    def _create(self, pod: dict[str, Any]) -> None:
        request(self.api, "create pod", "POST", "/api/v1/namespaces/default/pods", body=pod)

    def _drive_hot(self, watcher: Watcher) -> None:
        for node in NODES[1:]:
            self._create(
                configs.pod(
                    f"ls-{node}",
                    busy="50m",
                    node=node,
                    priority_class="koord-prod",
                    qos="LS",
                    requests={"cpu": "50m"},
                )
            )
        for p in configs.hot_pods(HOT, BUSY):
            self._create(p)
            if "ownerReferences" in p["metadata"]:
                watcher.own(p)
        self.say(
            "loop", f"{HOT} driven hot: ls-web (LS, prod) and be-free, be-batch-1..3 (BE), {BUSY} of CPU each"
        )
        wait_for(
            f"{HOT}'s NodeMetric reporting its five pods",
            lambda: watcher.node_cpu(HOT)[1] == 5,
            60,
            self._live(),
        )
        hot_cpu = self._steady(watcher)
        for node in NODES:
            self.report.reported_before[node] = 100.0 * watcher.node_cpu(node)[0] / watcher.capacity[node]
        be = [u for key, u in watcher.pod_cpu(HOT).items() if key.startswith("default/be-")]
        per_pod = sum(be) / len(be)
        cap = watcher.capacity[HOT]
        r = self.report
        r.low_percent, r.high_percent, r.scheduler_percent = configs.thresholds(
            hot=100.0 * hot_cpu / cap,
            cold=max(r.reported_before[n] for n in NODES[1:]),
            per_pod=100.0 * per_pod / cap,
        )
        self.say(
            "loop",
            f"{HOT} reports {100.0 * hot_cpu / cap:.0f}% cpu (BE jobs {per_pod:.0f}m each): "
            f"descheduler high threshold set to {r.high_percent}%, low {r.low_percent}%, "
            f"koord-scheduler's LoadAware threshold {r.scheduler_percent}%",
        )

    def _steady(self, watcher: Watcher) -> int:
        """The hot node's reported cpu once two reports in a row agree within 2 % of the node (the
        agents average over their window, and a pod's first samples include its interpreter starting)."""
        readings: list[tuple[float | None, int]] = []

        def agreed() -> bool:
            cpu, _, updated = watcher.node_cpu(HOT)
            if not readings or readings[-1][0] != updated:
                readings.append((updated, cpu))
            last = [c for _, c in readings[-2:]]
            return len(readings) >= 3 and abs(last[0] - last[1]) <= 0.02 * watcher.capacity[HOT]

        wait_for(f"{HOT}'s reported load steady", agreed, 60, self._live())
        return readings[-1][1]

    def _probe(self, scheduler: Component) -> None:
        """A new pod, gated until koord-scheduler has explained what it would do with it, then placed."""
        self._create(configs.pod("probe", busy="0", priority_class="koord-batch", qos="BE", gate=PROBE_GATE))
        wait_for(
            "the probe held at its scheduling gate",
            lambda: 'scheduler_pending_pods{queue="gated"} 1.0' in _get(scheduler.base + "/metrics"),
            30,
            self._live(),
        )
        doc = json.loads(_get(f"{scheduler.base}/debug/explain?pod={quote('default/probe')}"))
        probe = Placement("default/probe")
        for node in NODES:
            v = self.report.explain[node] = doc["nodes"][node]
            rejected = [
                f for f in v["filter"] if f["filter"] != "pass" and not f["filter"].startswith("skip")
            ]
            if rejected:
                probe.filtered[node] = f"{rejected[0]['plugin']}: {rejected[0]['filter']}"
            score = v["scores"].get("LoadAwareScheduling")
            if score is not None:
                probe.scores[node] = int(score)
            verdict = probe.filtered.get(node, "pass")
            self.say(configs.SCHEDULER, f"explain probe on {node}: filter {verdict}, LoadAware score {score}")
        request(
            self.api,
            "lift the probe's gate",
            "PATCH",
            "/api/v1/namespaces/default/pods/probe",
            body={"spec": {"schedulingGates": None}},
            content_type="application/merge-patch+json",
        )
        wait_for("the probe scheduled", lambda: self._node_of("probe"), 30, self._live())
        probe.node = self._node_of("probe")
        self.report.probe = probe
        self.say("loop", describe(probe))

    def _node_of(self, name: str) -> str:
        pod = request(self.api, "get pod", "GET", f"/api/v1/namespaces/default/pods/{name}", timeout=5)
        return str((pod.get("spec") or {}).get("nodeName") or "")

    def _descheduler(self, name: str, kubeconfig: Path, dry_run: bool) -> Component:
        config = write(
            self.work / f"{name}.yaml",
            configs.descheduler_config(self.report.low_percent, self.report.high_percent, dry_run=dry_run),
        )
        c = Component(
            name,
            "koord.descheduler",
            [f"--kubeconfig={kubeconfig}", f"--config={config}", "--request-timeout=2s"],
            self.logs,
            follow=self.follow,
        )
        self.procs.append(c.proc)
        wait_for(f"{name} ready", c.ready, 60, [c.proc])
        return c

    def _dry_run(self, kubeconfig: Path, watcher: Watcher) -> None:
        self._desched_lines.clear()
        d = self._descheduler("koord-descheduler-dry-run", kubeconfig, dry_run=True)
        wait_for(
            "a dry-run decision",
            lambda: any("would evict" in line for line in self._desched_lines),
            60,
            [d.proc],
        )
        rounds = sum(1 for line in self._desched_lines if "eviction(s) (dry run)" in line)
        wait_for(
            "one more dry-run round",
            lambda: sum(1 for line in self._desched_lines if "eviction(s) (dry run)" in line) > rounds,
            30,
            [d.proc],
        )
        self.report.exit_codes[d.name] = d.proc.stop()
        self.report.dry_run_decisions = [
            m.group(1) for line in self._desched_lines if (m := re.search(r"would evict (\S+)", line))
        ]
        watcher.poll()
        self.report.dry_run_pods_left = sum(
            1 for k in [*configs.EVICTION_ORDER, "default/ls-web"] if watcher.pod(k) is not None
        )
        self.report.dry_run_events = len(watcher.events)
        would = ", ".join(dict.fromkeys(self.report.dry_run_decisions))
        left, events = self.report.dry_run_pods_left, self.report.dry_run_events
        self.say(
            "loop", f"dry run over: it would have evicted {would}; {left} pods still there, {events} Events"
        )

    def _deschedule(self, kubeconfig: Path, watcher: Watcher) -> None:
        self._desched_lines.clear()
        d = self._descheduler("koord-descheduler", kubeconfig, dry_run=False)
        high = self.report.high_percent * watcher.capacity[HOT] / 100.0

        def evicted() -> list[str]:
            return [
                m.group(1) for line in self._desched_lines if (m := re.search(r"evicted (\S+) from", line))
            ]

        def settled() -> bool:
            cpu, _, _ = watcher.node_cpu(HOT, live_only=True)
            gone = all(watcher.pod(k) is None for k in evicted())
            return bool(evicted()) and gone and cpu <= high

        wait_for(f"{HOT} under its high threshold after evictions", settled, 90, [d.proc])
        first = next(i for i, line in enumerate(self._desched_lines) if re.search(r"evicted \S+ from", line))
        self.report.counted_rounds = sum(1 for line in self._desched_lines[:first] if "in a row" in line)
        # The pods left on a contended node take up the CPU an eviction frees, so the node can climb back
        # over the threshold, and the descheduler then evicts the next pod after its anomaly rounds. The
        # loop is done when the node has stayed under the threshold for CALM_SECONDS.
        calm_since: list[float | None] = [None]

        def calm() -> bool:
            cpu, _, _ = watcher.node_cpu(HOT, live_only=True)
            if cpu > high or any(watcher.pod(k) is not None for k in evicted()):
                calm_since[0] = None
                return False
            since = calm_since[0] = calm_since[0] or time.monotonic()
            return time.monotonic() - since >= CALM_SECONDS

        wait_for(f"{HOT} under its high threshold for {CALM_SECONDS:.0f} s", calm, 60, [d.proc])

        def replacements_placed() -> bool:
            placed = [watcher.pod(r) for r in watcher.replacements]
            return all(p and p["spec"].get("nodeName") for p in placed) and len(watcher.replacements) >= len(
                evicted()
            )

        wait_for("the replacements placed", replacements_placed, 30, [d.proc])
        self.report.evicted = evicted()
        cpu, _, _ = watcher.node_cpu(HOT, live_only=True)
        self.report.hot_after = 100.0 * cpu / watcher.capacity[HOT]
        self.report.replacements = {
            r: str(p["spec"].get("nodeName")) for r in watcher.replacements if (p := watcher.pod(r))
        }
        after, high = self.report.hot_after, self.report.high_percent
        gone = ", ".join(self.report.evicted)
        self.say("loop", f"{HOT} now reports {after:.0f}% cpu (threshold {high}%) after evicting {gone}")
        self.report.exit_codes[d.name] = d.proc.stop()

    # ---- the end ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every process (reverse order), the kubelets (killing every pod process, removing every
        cgroup) and the API server last."""
        self.stop.set()
        stop_all(self.procs, self.kubelets, self.api, self.report.exit_codes)


def run(work: Path, say: Callable[[str, str], None]) -> Report:
    loop = Loop(work, say)
    try:
        return loop.run()
    finally:
        loop.close()


def _get(url: str) -> str:
    return http_get(url, timeout=5)[1].decode()
