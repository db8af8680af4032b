"""Strategic merge patch directives and ordering, checked on the merge function alone.

Expected results are those of apimachinery's ``pkg/util/strategicpatch`` (``patch_test.go`` cases of
``mergeMap``/``mergeSlice``), reworded as small pod documents.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.apiserver import smp
from tests.apiserver.status import APIError

POD = smp.schema_for(("", "pods"))


def _pod() -> dict[str, Any]:
    return {
        "metadata": {"finalizers": ["a/x"], "labels": {"app": "web", "tier": "be"}},
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "image": "1",
                    "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                },
                {"name": "b", "image": "2"},
            ],
            "tolerations": [{"key": "t1"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
        },
    }


@pytest.mark.parametrize(
    ("patch", "path", "expected"),
    [
        # a set of scalars: new ones first, then the server's (normalizeElementOrder)
        ({"metadata": {"finalizers": ["b/y"]}}, ("metadata", "finalizers"), ["b/y", "a/x"]),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a/x"]}}, ("metadata", "finalizers"), []),
        # maps merge, null deletes a key
        (
            {"metadata": {"labels": {"tier": None, "v": "2"}}},
            ("metadata", "labels"),
            {"app": "web", "v": "2"},
        ),
        # a list without patchStrategy is replaced
        ({"spec": {"tolerations": [{"key": "t2"}]}}, ("spec", "tolerations"), [{"key": "t2"}]),
        # nested merge keys: env by name inside containers by name
        (
            {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "3"}]}]}},
            ("spec", "containers", 0, "env"),
            [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}],
        ),
        (
            {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}]}]}},
            ("spec", "containers", 0, "env"),
            [{"name": "Y", "value": "2"}],
        ),
        # $patch: replace on a list element replaces the list, on a map the map
        (
            {"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "9"}]}},
            ("spec", "containers"),
            [{"name": "z", "image": "9"}],
        ),
        (
            {"metadata": {"labels": {"$patch": "replace", "only": "me"}}},
            ("metadata", "labels"),
            {"only": "me"},
        ),
        ({"metadata": {"labels": {"$patch": "delete"}}}, ("metadata",), {"finalizers": ["a/x"]}),
        # $setElementOrder reorders
        (
            {"status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}]}},
            ("status", "conditions"),
            [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        ),
        # a merged existing element keeps its place; a new one comes before the server-only rest
        (
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}, {"type": "New", "status": "True"}]
                }
            },
            ("status", "conditions"),
            [
                {"type": "Ready", "status": "True"},
                {"type": "New", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
        ),
        # $retainKeys drops what it does not name
        ({"spec": {"$retainKeys": ["containers"]}}, ("spec",), {"containers": _pod()["spec"]["containers"]}),
    ],
)
def test_directives_and_order(patch: dict[str, Any], path: tuple[Any, ...], expected: Any) -> None:
    got: Any = smp.apply(_pod(), patch, POD)
    for step in path:
        got = got[step]
    assert got == expected


def test_the_target_is_not_changed_and_unknown_types_replace_lists() -> None:
    target = _pod()
    smp.apply(target, {"metadata": {"finalizers": ["b/y"]}}, POD)
    assert target == _pod()
    generic = smp.apply(
        {"spec": {"ports": [1, 2]}}, {"spec": {"ports": [3]}}, smp.schema_for(("", "configmaps"))
    )
    assert generic == {"spec": {"ports": [3]}}


def test_an_element_without_its_merge_key_is_refused() -> None:
    with pytest.raises(APIError) as err:
        smp.apply(_pod(), {"spec": {"containers": [{"image": "x"}]}}, POD)
    assert err.value.code == 500 and "does not contain declared merge key: name" in err.value.message
    with pytest.raises(APIError) as err:
        smp.apply(_pod(), [{"op": "add"}], POD)
    assert err.value.code == 400
