"""One value deep in a decoded JSON document, by its keys: each step must be an object."""

from __future__ import annotations

from collections.abc import Mapping

from koordshared.apis.slo.nodeslo import JSONValue


def at(doc: JSONValue, *keys: str) -> JSONValue:
    """``doc[k1][k2]...``, asserting that each level is a JSON object holding the key."""
    value = doc
    for i, key in enumerate(keys):
        assert isinstance(value, Mapping), f"{'/'.join(keys[:i]) or 'the document'} is not an object"
        value = value[key]
    return value
