"""Field and label selector parsing and matching."""

from __future__ import annotations

import pytest

from tests.apiserver.selectors import Selector, parse_labels
from tests.apiserver.status import APIError

POD = {
    "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "fe"}},
    "spec": {"nodeName": "n1", "hostNetwork": True},
    "status": {"phase": "Running"},
}
FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.hostNetwork", "status.phase"}


@pytest.mark.parametrize(
    ("fields", "labels", "expected"),
    [
        ("spec.nodeName=n1", None, True),
        ("spec.nodeName==n1", None, True),
        ("spec.nodeName!=n1", None, False),
        ("spec.nodeName=n1,status.phase=Pending", None, False),
        ("spec.hostNetwork=true", None, True),
        ("status.phase=", None, False),
        (None, "app in (db, web),tier", True),
        (None, "app notin (web)", False),
        (None, "missing!=x", True),
        (None, "!tier", False),
        (None, "app=web,tier!=fe", False),
        ("metadata.namespace=ns", "app", True),
        ("", "", True),
    ],
)
def test_matching(fields: str | None, labels: str | None, expected: bool) -> None:
    assert Selector.parse(fields, labels, FIELDS).matches(POD) is expected


def test_missing_field_compares_as_empty() -> None:
    pending = {"metadata": {"name": "q"}, "spec": {}}
    assert Selector.parse("spec.nodeName=", None, FIELDS).matches(pending)
    assert not Selector.parse("spec.nodeName!=", None, FIELDS).matches(pending)


@pytest.mark.parametrize("bad", ["spec.containers=x", "nonsense"])
def test_bad_field_selectors_are_400(bad: str) -> None:
    with pytest.raises(APIError) as err:
        Selector.parse(bad, None, FIELDS)
    assert err.value.code == 400


def test_bad_label_selector_is_400() -> None:
    with pytest.raises(APIError) as err:
        parse_labels("app in web")
    assert err.value.code == 400


def test_label_keys_with_prefixes() -> None:
    (req,) = parse_labels("koordinator.sh/eviction-enabled=true")
    assert (req.key, req.op, set(req.values)) == ("koordinator.sh/eviction-enabled", "=", {"true"})
