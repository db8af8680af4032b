"""The reference an Event makes to its object (client-go's ``tools/reference.GetReference``).

The kind and apiVersion are the object's own when it names them (a GET, a watch event, a custom
resource); an object that names none (an item of a built-in type's list: kube-apiserver leaves them out)
takes the ones its caller knows it to be, as ``GetReference`` falls back to the scheme's type of a Go
object. An object that names none and has no known type cannot be referred to: :class:`NoKind`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordshared.apis.meta.groups import Resource


class NoKind(ValueError):
    """The object names no kind and its type is not known: no reference can be made."""


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A ``v1.ObjectReference``: ``involvedObject`` of a core Event, ``regarding``/``related`` of an
    events.k8s.io one."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any], known: Resource | None = None) -> ObjectRef:
        """The reference to ``obj``; ``known`` is its type when the object does not say (:class:`NoKind`
        when neither does)."""
        kind, api_version = str(obj.get("kind") or ""), str(obj.get("apiVersion") or "")
        if not kind and not api_version and known is not None:
            kind, api_version = known.kind, known.api_version
        if not kind:
            raise NoKind(f"{_name(obj)}: the object names no kind and its type is not known")
        meta = obj.get("metadata") or {}
        return cls(
            kind=kind,
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=api_version,
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def as_json(self) -> dict[str, str]:
        """The reference as the API writes it (empty fields left out)."""
        fields = (
            ("kind", self.kind),
            ("namespace", self.namespace),
            ("name", self.name),
            ("uid", self.uid),
            ("apiVersion", self.api_version),
            ("resourceVersion", self.resource_version),
        )
        return {k: v for k, v in fields if v}


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)
