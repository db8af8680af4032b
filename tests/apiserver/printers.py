"""The columns kube-apiserver prints for the built-in types served here (``pkg/printers/internalversion/
printers.go``): what ``kubectl get`` shows, ``-o wide`` adding the columns of priority 1.

Each printer is a list of columns and a function from an object to its cells. Ages are as
:mod:`tests.apiserver.ages` prints them; absent values print as upstream does (``<none>``,
``<unknown>``). Types without a printer
get the default table of ``apiserver/pkg/registry/rest/table.go``: Name and Created At.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tests.apiserver.ages import human_duration, parse_time, since
from tests.apiserver.workloads import selector_string

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str = "string"
    priority: int = 0
    format: str = ""
    description: str = ""

    def definition(self) -> Obj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


Cells = Callable[[Obj, float], list[Any]]
NAME = Column("Name", format="name", description="Name must be unique within a namespace.")
AGE = Column("Age", description="The time since the object was created.")
CREATED_AT = Column("Created At", type="date", description="When the object was created.")


def age(obj: Obj, now: float) -> str:
    return since(obj["metadata"].get("creationTimestamp"), now)


def _d(obj: Obj, *path: str) -> Any:
    cur: Any = obj
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur


def _labels(mapping: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` joined by commas, ``<none>`` when empty."""
    if not isinstance(mapping, dict) or not mapping:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(mapping.items()))


def _or_none(value: Any) -> Any:
    return value if value not in (None, "") else "<none>"


def _pod(pod: Obj, now: float) -> list[Any]:
    spec, st = pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or []
    reason = st.get("reason") or st.get("phase") or ""
    restarts, ready, running, last_restart = 0, 0, False, None
    init = st.get("initContainerStatuses") or []
    for i, c in enumerate(init):
        state = c.get("state") or {}
        restarts += int(c.get("restartCount") or 0)
        done = state.get("terminated") or {}
        if done and done.get("exitCode") == 0:
            continue
        if done:
            reason = f"Init:{done.get('reason') or 'ExitCode:' + str(done.get('exitCode'))}"
        elif (state.get("waiting") or {}).get("reason") not in (None, "", "PodInitializing"):
            reason = f"Init:{state['waiting']['reason']}"
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        break
    else:
        for c in reversed(st.get("containerStatuses") or []):
            restarts += int(c.get("restartCount") or 0)
            finished = parse_time(_d(c, "lastState", "terminated", "finishedAt"))
            if finished is not None and (last_restart is None or finished > last_restart):
                last_restart = finished
            state = c.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif (state.get("terminated") or {}).get("reason"):
                reason = state["terminated"]["reason"]
            elif state.get("terminated"):
                code = state["terminated"].get("exitCode")
                signal = state["terminated"].get("signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{code}"
            elif c.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            ready_cond = [c for c in st.get("conditions") or () if c.get("type") == "Ready"]
            reason = "Running" if ready_cond and ready_cond[0].get("status") == "True" else "NotReady"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    restart_text = str(restarts)
    if last_restart is not None:
        restart_text = f"{restarts} ({human_duration(now - last_restart)} ago)"
    gates = spec.get("readinessGates") or []
    true_conditions = {c.get("type") for c in st.get("conditions") or () if c.get("status") == "True"}
    gate_text = "<none>"
    if gates:
        gate_text = f"{sum(1 for g in gates if g.get('conditionType') in true_conditions)}/{len(gates)}"
    return [
        pod["metadata"]["name"],
        f"{ready}/{len(containers)}",
        reason,
        restart_text,
        age(pod, now),
        _or_none(st.get("podIP")),
        _or_none(spec.get("nodeName")),
        _or_none(st.get("nominatedNodeName")),
        gate_text,
    ]


def _node(node: Obj, now: float) -> list[Any]:
    st, labels = node.get("status") or {}, node["metadata"].get("labels") or {}
    ready = [c for c in st.get("conditions") or () if c.get("type") == "Ready"]
    state = ["Unknown"] if not ready else ["Ready" if ready[0].get("status") == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        state.append("SchedulingDisabled")
    roles = sorted(
        {
            k.partition("node-role.kubernetes.io/")[2]
            for k in labels
            if k.startswith("node-role.kubernetes.io/")
        }
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    addresses = st.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), None) or "<none>"

    info = st.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        ",".join(state),
        ",".join(r for r in roles if r) or "<none>",
        age(node, now),
        info.get("kubeletVersion") or "",
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _event(ev: Obj, now: float) -> list[Any]:
    first = (
        since(ev.get("firstTimestamp"), now) if ev.get("firstTimestamp") else since(ev.get("eventTime"), now)
    )
    last = since(ev.get("lastTimestamp"), now) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 1
    if ev.get("series"):
        last = since(ev["series"].get("lastObservedTime"), now)
        count = ev["series"].get("count") or count
    involved = ev.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = ev.get("source") or {}
    component = source.get("component") or ev.get("reportingComponent") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    return [
        last,
        ev.get("type") or "",
        ev.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {host}" if host else component,
        str(ev.get("message") or "").strip(),
        first,
        int(count),
        ev["metadata"]["name"],
    ]


def _containers(template: Any) -> tuple[str, str]:
    cs = _d(template, "spec", "containers") or []
    return ",".join(str(c.get("name")) for c in cs), ",".join(str(c.get("image")) for c in cs)


def _deployment(d: Obj, now: float) -> list[Any]:
    spec, st = d.get("spec") or {}, d.get("status") or {}
    names, images = _containers(spec.get("template"))
    return [
        d["metadata"]["name"],
        f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
        int(st.get("updatedReplicas") or 0),
        int(st.get("availableReplicas") or 0),
        age(d, now),
        names,
        images,
        selector_string(spec.get("selector")) or "<none>",
    ]


def _daemonset(ds: Obj, now: float) -> list[Any]:
    spec, st = ds.get("spec") or {}, ds.get("status") or {}
    names, images = _containers(spec.get("template"))
    counts = ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled")
    return [
        ds["metadata"]["name"],
        *(int(st.get(k) or 0) for k in counts),
        int(st.get("numberAvailable") or 0),
        _labels(_d(spec, "template", "spec", "nodeSelector")),
        age(ds, now),
        names,
        images,
        selector_string(spec.get("selector")) or "<none>",
    ]


def _service(svc: Obj, now: float) -> list[Any]:
    spec = svc.get("spec") or {}
    typ = spec.get("type") or "ClusterIP"
    external = ",".join(spec.get("externalIPs") or [])
    if typ == "LoadBalancer":
        ingress = [
            i.get("ip") or i.get("hostname") for i in _d(svc, "status", "loadBalancer", "ingress") or ()
        ]
        external = ",".join(x for x in [*ingress, *(spec.get("externalIPs") or [])] if x) or "<pending>"
    elif typ == "ExternalName":
        external = spec.get("externalName") or ""
    ports = []
    for p in spec.get("ports") or ():
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        ports.append(f"{p.get('port')}{node}/{p.get('protocol') or 'TCP'}")
    return [
        svc["metadata"]["name"],
        typ,
        _or_none(spec.get("clusterIP")),
        external or "<none>",
        ",".join(ports) or "<none>",
        age(svc, now),
        _labels(spec.get("selector")),
    ]


def _pdb(pdb: Obj, now: float) -> list[Any]:
    spec = pdb.get("spec") or {}
    return [
        pdb["metadata"]["name"],
        str(spec["minAvailable"]) if spec.get("minAvailable") is not None else "N/A",
        str(spec["maxUnavailable"]) if spec.get("maxUnavailable") is not None else "N/A",
        int(_d(pdb, "status", "disruptionsAllowed") or 0),
        age(pdb, now),
    ]


def _binding(rb: Obj, now: float) -> list[Any]:
    subjects = rb.get("subjects") or []

    def names(kind: str) -> str:
        found = [
            f"{s.get('namespace')}/{s.get('name')}" if kind == "ServiceAccount" else str(s.get("name"))
            for s in subjects
            if s.get("kind") == kind
        ]
        return ", ".join(found)

    ref = rb.get("roleRef") or {}
    return [
        rb["metadata"]["name"],
        f"{ref.get('kind')}/{ref.get('name')}",
        age(rb, now),
        names("User"),
        names("Group"),
        names("ServiceAccount"),
    ]


def _simple(*cells: Callable[[Obj], Any]) -> Cells:
    """Name, the given cells, then Age."""

    def row(obj: Obj, now: float) -> list[Any]:
        return [obj["metadata"]["name"], *(c(obj) for c in cells), age(obj, now)]

    return row


def cols(*specs: str) -> tuple[Column, ...]:
    """Columns from ``[+]Name[:type]`` (``+``: priority 1, shown by ``-o wide``); Name and Age are the
    standard ones."""
    out = []
    for spec in specs:
        text, _, typ = spec.lstrip("+").partition(":")
        standard = {"Name": NAME, "Age": AGE}.get(text) if not spec.startswith("+") else None
        name_format = "name" if text == "Name" else ""
        out.append(standard or Column(text, typ or "string", int(spec.startswith("+")), name_format))
    return tuple(out)


CONTAINERS = ("+Containers", "+Images", "+Selector")
COUNT = ":integer"
PRINTERS: dict[tuple[str, str], tuple[tuple[Column, ...], Cells]] = {
    ("", "pods"): (
        cols(
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "+IP",
            "+Node",
            "+Nominated Node",
            "+Readiness Gates",
        ),
        _pod,
    ),
    ("", "nodes"): (
        cols("Name", "Status", "Roles", "Age", "Version", "+Internal-IP", "+External-IP", "+OS-Image")
        + cols("+Kernel-Version", "+Container-Runtime"),
        _node,
    ),
    ("", "events"): (
        cols("Last Seen", "Type", "Reason", "Object", "+Subobject", "+Source", "Message", "+First Seen")
        + cols("+Count", "+Name"),
        _event,
    ),
    ("coordination.k8s.io", "leases"): (
        cols("Name", "Holder", "Age"),
        _simple(lambda ls: _d(ls, "spec", "holderIdentity") or ""),
    ),
    ("", "namespaces"): (cols("Name", "Status", "Age"), _simple(lambda ns: _d(ns, "status", "phase") or "")),
    ("", "configmaps"): (
        cols("Name", "Data" + COUNT, "Age"),
        _simple(lambda cm: len(cm.get("data") or {}) + len(cm.get("binaryData") or {})),
    ),
    ("", "secrets"): (
        cols("Name", "Type", "Data" + COUNT, "Age"),
        _simple(lambda s: s.get("type") or "", lambda s: len(s.get("data") or {})),
    ),
    ("", "serviceaccounts"): (
        cols("Name", "Secrets" + COUNT, "Age"),
        _simple(lambda sa: len(sa.get("secrets") or [])),
    ),
    ("", "services"): (
        cols("Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "+Selector"),
        _service,
    ),
    ("apps", "deployments"): (
        cols("Name", "Ready", "Up-to-date" + COUNT, "Available" + COUNT, "Age", *CONTAINERS),
        _deployment,
    ),
    ("apps", "daemonsets"): (
        cols("Name", *(n + COUNT for n in ("Desired", "Current", "Ready", "Up-to-date", "Available")))
        + cols("Node Selector", "Age", *CONTAINERS),
        _daemonset,
    ),
    ("policy", "poddisruptionbudgets"): (
        cols("Name", "Min Available", "Max Unavailable", "Allowed Disruptions" + COUNT, "Age"),
        _pdb,
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        cols("Name", "Value" + COUNT, "Global-Default:boolean", "Age", "Preemption Policy"),
        lambda pc, now: [
            pc["metadata"]["name"],
            int(pc.get("value") or 0),
            bool(pc.get("globalDefault")),
            age(pc, now),
            pc.get("preemptionPolicy") or "",
        ],
    ),
    **{
        ("rbac.authorization.k8s.io", plural): (
            cols("Name", "Role", "Age", "+Users", "+Groups", "+ServiceAccounts"),
            _binding,
        )
        for plural in ("rolebindings", "clusterrolebindings")
    },
}


def default_row(obj: Obj, now: float) -> list[Any]:
    """``defaultTableConvertor``: the name and the creation time as RFC 3339."""
    return [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp") or ""]


DEFAULT = ((NAME, CREATED_AT), default_row)
