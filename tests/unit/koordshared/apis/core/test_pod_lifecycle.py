"""The pod-deletion-cost annotation read as Kubernetes reads it: any text a pod's owner writes gives a
cost or 0, never an exception out of the descheduler's pod ordering."""

from __future__ import annotations

import pytest

from koordshared.apis.core.pod import DELETION_COST_ANNOTATION, deletion_cost


@pytest.mark.parametrize(
    ("raw", "cost"),
    [
        ("9", 9),
        ("-5", -5),
        ("0", 0),
        ("2147483647", 2**31 - 1),
        ("2147483648", 0),  # past int32
        ("+5", 0),  # no sign prefix
        ("05", 0),  # no leading zero
        ("-0", 0),
        ("", 0),
        ("ten", 0),
        ("\u00b2", 0),  # isdigit() accepts it, int() does not: it once raised ValueError
        ("\u00b9\u00b2", 0),
    ],
)
def test_deletion_cost_of_any_annotation_text(raw: str, cost: int) -> None:
    pod = {"metadata": {"name": "p", "annotations": {DELETION_COST_ANNOTATION: raw}}}
    assert deletion_cost(pod) == cost
