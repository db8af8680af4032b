"""ReservationArgs: Koordinator's defaults, its validation, and the stricter refusals (what is not ported is
refused rather than silently ignored); the plugin refuses a front end that cannot schedule reservations."""

from __future__ import annotations

import re

import pytest

from koord.scheduler.framework import InvalidArgs
from koord.scheduler.plugins.reservation import Reservation
from koord.scheduler.plugins.reservation.args import ReservationArgs, is_extended_resource, parse_args


def test_defaults_are_koordinators() -> None:
    args = parse_args(None)
    assert args == ReservationArgs()
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)
    assert (args.gc_duration, args.gc_interval, args.resync_interval) == (86400.0, 60.0, 60.0)
    assert args.controller_workers == 1 and not args.disable_gc
    # 0 seconds means the default, as SetDefaults_ReservationArgs has it.
    assert parse_args({"gcDurationSeconds": 0}).gc_duration == 86400.0
    assert parse_args({"gcDurationSeconds": 60, "disableGarbageCollection": True}).gc_duration == 60.0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
        ({"gcDurationSeconds": -5}, "gcDurationSeconds"),
        ({"gcIntervalSeconds": -5}, "gcIntervalSeconds"),
        ({"resyncIntervalSeconds": -1}, "resyncIntervalSeconds"),
        ({"controllerWorkers": 0}, "controllerWorkers"),
        ({"ignoredResources": ["cpu"]}, "ignoredResources[0]"),
        ({"ignoredResources": ["kubernetes.io/batch-cpu"]}, "ignoredResources[0]"),
        ({"ignoredResourceGroups": ["example.com/gpu"]}, "ignoredResourceGroups[0]"),
        ({"ignoredResourceGroups": ["kubernetes.io"]}, "ignoredResourceGroups[0]"),
        ({"enablePreemption": True}, "enablePreemption"),
        ({"preAllocationConfig": {"enableClusterMode": True}}, "preAllocationConfig"),
        ({"reservationSelectorIndex": {"enabled": "yes"}}, "reservationSelectorIndex.enabled"),
        ({"gcDuration": 5}, "unknown field(s) gcDuration"),
        ({"gcDurationSeconds": "1h"}, "gcDurationSeconds"),
    ],
)
def test_bad_args_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgs, match=re.escape(field)):
        parse_args(raw)


def test_ignored_resources_and_groups() -> None:
    args = parse_args({"ignoredResources": ["example.com/gpu"], "ignoredResourceGroups": ["vendor.io"]})
    assert args.ignored("example.com/gpu") and args.ignored("vendor.io/fpga")
    assert not args.ignored("cpu") and not args.ignored("example.com/nic")
    assert (
        parse_args({"reservationSelectorIndex": {"enabled": True, "keyPrefixes": ["a/"]}})
        == ReservationArgs()
    )
    assert is_extended_resource("example.com/gpu") and not is_extended_resource("hugepages-2Mi")


def test_the_extender_front_end_is_refused() -> None:
    with pytest.raises(ValueError, match="runs in koord-scheduler only"):
        Reservation(None, object())
