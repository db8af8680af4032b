"""Loading manifests into the store (``APIServer.apply``): the RBAC, ServiceAccounts, CRDs, ConfigMaps...
of ``deploy/*`` as a cluster would hold them after ``kubectl apply``.

Each document is matched to a served type by ``apiVersion`` and ``kind`` and created through the store
with its type's create rules; documents of kinds not served here are skipped, and an object that already
exists is left as it is (as an unchanged ``kubectl apply``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.apiserver import status
from tests.apiserver.resources import Registry
from tests.apiserver.store import Store
from tests.support.paths import ROOT

Obj = dict[str, Any]
CRD_DIR = ROOT / "deploy" / "daemonset" / "crds"
NODEMETRIC_CRD = CRD_DIR / "slo.koordinator.sh_nodemetrics.yaml"
NODESLO_CRD = CRD_DIR / "slo.koordinator.sh_nodeslos.yaml"
NRT_CRD = CRD_DIR / "topology.node.k8s.io_noderesourcetopologies.yaml"
DEFAULT_CRDS = (NODEMETRIC_CRD, NODESLO_CRD, NRT_CRD)


def documents(sources: Iterable[str | os.PathLike[str] | Obj]) -> Iterator[Obj]:
    for src in sources:
        if isinstance(src, dict):
            yield src
            continue
        for doc in yaml.safe_load_all(Path(src).read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "List":
                yield from doc.get("items") or ()
            elif isinstance(doc, dict):
                yield doc


def apply(store: Store, registry: Registry, sources: Iterable[str | os.PathLike[str] | Obj]) -> list[str]:
    done = []
    for doc in documents(sources):
        group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
        types = [
            rt
            for rt in registry.all()
            if (rt.group, rt.version, rt.kind) == (group, version, doc.get("kind"))
        ]
        if not types:
            continue
        meta = doc.get("metadata") or {}
        try:
            store.create(types[0], doc, meta.get("namespace"), keep_status=False)
        except status.APIError as err:
            if err.code != 409:
                raise
        done.append(f"{doc['kind']}/{meta.get('name')}")
    return done
