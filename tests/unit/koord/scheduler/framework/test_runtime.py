"""The plugin framework: profile merging (defaults, disabled, multiPoint, weights), registry and entry
points, startup errors naming the plugin, the filter and score runs, reserve rollback, score scaling."""

from __future__ import annotations

from typing import Any

import pytest

from koord.scheduler.framework import (
    DEPRECATED_ENTRY_POINT_GROUPS,
    ENTRY_POINT_GROUP,
    SKIP,
    CycleState,
    InvalidArgs,
    NodeInfo,
    Status,
)
from koord.scheduler.framework.profile import load_profile, parse_profile
from koord.scheduler.framework.runtime import Framework, PluginFailure
from koord.scheduler.framework.verdicts import combine_scores, run_filter
from koord.scheduler.plugins import BUILTIN, plugin_registry
from koord.scheduler.testing import run_score
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.pluginregistry import Registry, group_entry_points
from tests.support.scheduler.env import Env


class Fixed:
    """Scores each node from args ``{"scores": {node: score}}``; rejects nodes listed in ``reject``."""

    def __init__(self, name: str, args: Any) -> None:
        self.name = name
        args = args or {}
        self.scores = args.get("scores", {})
        self.reject = args.get("reject", {})
        self.calls: list[str] = []
        self.fail_reserve = args.get("fail_reserve", False)

    def pre_filter(self, state: CycleState, pod: Any) -> Status | None:
        self.calls.append("pre_filter")
        return SKIP if pod.get("skip") == self.name else None

    def filter(self, state: CycleState, pod: Any, node_info: NodeInfo) -> Status | None:
        why = self.reject.get(node_info.name)
        if why == "unresolvable":
            return Status.unresolvable(f"{self.name} says never")
        return Status.unschedulable(why) if why else None

    def score(self, state: CycleState, pod: Any, node_info: NodeInfo) -> int:
        return int(self.scores.get(node_info.name, 0))

    def reserve(self, state: CycleState, pod: Any, node_name: str) -> Status | None:
        self.calls.append(f"reserve {node_name}")
        return Status.unschedulable("no room") if self.fail_reserve else None

    def unreserve(self, state: CycleState, pod: Any, node_name: str) -> None:
        self.calls.append(f"unreserve {node_name}")


class Normalizing(Fixed):
    def normalize_score(self, state: CycleState, pod: Any, scores: dict[str, int]) -> Status | None:
        top = max(scores.values()) or 1
        for k, v in scores.items():
            scores[k] = v * 100 // top
        return None


def registry() -> Registry:
    r = Registry()
    for name, factory in BUILTIN.items():
        r.register(name, factory)
    r.register("A", lambda args, handle: Fixed("A", args))
    r.register("B", lambda args, handle: Fixed("B", args))
    r.register("N", lambda args, handle: Normalizing("N", args))
    return r


def framework(profile: dict[str, Any]) -> Framework:
    return Framework(parse_profile({"profiles": [profile]}), registry(), Env().handle)


NODES = [NodeInfo(n, {"metadata": {"name": n}}) for n in ("n1", "n2", "n3")]


def test_default_profile_is_load_aware_everywhere() -> None:
    fw = Framework(parse_profile(None), registry(), Env().handle)
    assert {p: [e.name for e in es] for p, es in fw.points.items()} == {
        "preFilter": ["LoadAwareScheduling"],
        "filter": ["LoadAwareScheduling"],
        "preScore": ["LoadAwareScheduling"],
        "score": ["LoadAwareScheduling"],
        "reserve": ["LoadAwareScheduling"],
    }


def test_merge_disabled_enabled_and_weights() -> None:
    fw = framework(
        {
            "plugins": {
                "multiPoint": {"enabled": [{"name": "A", "weight": 3}]},
                "score": {"enabled": [{"name": "LoadAwareScheduling", "weight": 5}, {"name": "B"}]},
                "filter": {"disabled": [{"name": "LoadAwareScheduling"}]},
                "reserve": {"disabled": [{"name": "*"}]},
            }
        }
    )
    assert [e.name for e in fw.points["filter"]] == ["A"]
    # kube-scheduler's order: a multiPoint plugin re-listed at the point first, then the other multiPoint
    # plugins, then the point's own entries
    assert [(e.name, e.weight) for e in fw.points["score"]] == [
        ("LoadAwareScheduling", 5),
        ("A", 3),
        ("B", 1),
    ]
    assert fw.points["reserve"] == []
    assert fw.total_score_weight == 9
    fw = framework({"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "B"}]}}})
    assert [e.name for e in fw.points["filter"]] == ["B"]


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ({"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}, "plugin 'Nope': not registered"),
        (
            {"pluginConfig": [{"name": "Typo", "args": {}}]},
            "plugin 'Typo': pluginConfig for an unknown plugin",
        ),
        (
            {"pluginConfig": [{"name": "LoadAwareScheduling", "args": {"usageThresholds": {"cpu": 200}}}]},
            "plugin 'LoadAwareScheduling': invalid args: usageThresholds.cpu",
        ),
    ],
)
def test_startup_errors_name_the_plugin(profile: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginError, match=message):
        framework(profile)


class FilterOnly:
    name = "F"

    def __init__(self, args: Any, handle: Any) -> None:
        if args and args.get("bad"):
            raise InvalidArgs("bad: must be false")

    def filter(self, state: Any, pod: Any, node_info: Any) -> None:
        return None


def test_plugin_shape_errors() -> None:
    r = registry()
    r.register("F", FilterOnly)
    r.register("Liar", FilterOnly)
    r.register("Empty", lambda args, handle: type("E", (), {"name": "Empty"})())
    handle = Env().handle
    with pytest.raises(PluginError, match="'F': enabled at score but has no score"):
        Framework(
            parse_profile({"profiles": [{"plugins": {"score": {"enabled": [{"name": "F"}]}}}]}), r, handle
        )
    with pytest.raises(PluginError, match=r"'Liar'.*built a plugin named 'F'"):
        Framework(
            parse_profile({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Liar"}]}}}]}), r, handle
        )
    with pytest.raises(PluginError, match=r"'Empty'.*implements no extension point"):
        Framework(
            parse_profile({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Empty"}]}}}]}),
            r,
            handle,
        )
    bad = {
        "profiles": [
            {
                "plugins": {"filter": {"enabled": [{"name": "F"}]}},
                "pluginConfig": [{"name": "F", "args": {"bad": True}}],
            }
        ]
    }
    with pytest.raises(PluginError, match="'F': invalid args: bad: must be false"):
        Framework(parse_profile(bad), r, handle)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Deployment"}, "kind 'Deployment'"),
        ({"apiVersion": "v1"}, "apiVersion"),
        ({"profiles": [{}, {}]}, "one profile, found 2"),
        ({"profiles": [{"plugins": {"bind": {"enabled": [{"name": "A"}]}}}]}, "cannot run plugins at bind"),
        ({"profiles": [{"plugins": {"filtr": {}}}]}, "filtr: unknown extension point"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "A", "weight": -1}]}}}]}, "weight"),
        ({"profiles": [{"plugins": {"score": {"enabled": [{"nam": "A"}]}}}]}, "enabled\\[0\\]"),
        ({"profiles": [{"pluginConfig": [{"name": "A"}, {"name": "A"}]}]}, "duplicate pluginConfig for A"),
        ({"profiles": [{"schedulerNmae": "x"}]}, "unknown field\\(s\\) schedulerNmae"),
    ],
)
def test_profile_errors(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_profile(doc)


def test_profile_file_keeps_kube_scheduler_keys(tmp_path: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "extenders: [{urlPrefix: 'http://x'}]\nprofiles:\n- schedulerName: s\n  pluginConfig:\n"
        "  - name: LoadAwareScheduling\n    args: {apiVersion: kubescheduler.config.k8s.io/v1, "
        "kind: LoadAwareSchedulingArgs, usageThresholds: {cpu: 0, memory: 0}}\n"
    )
    p = load_profile(path)
    assert p.scheduler_name == "s"
    assert p.plugin_config["LoadAwareScheduling"] == {"usageThresholds": {"cpu": 0, "memory": 0}}
    path.write_text("profiles: [")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_profile(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_profile(tmp_path / "missing.yaml")


def test_filter_reports_the_first_rejecting_plugin_in_order() -> None:
    fw = framework(
        {
            "plugins": {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "A"}, {"name": "B"}]}},
            "pluginConfig": [
                {"name": "A", "args": {"reject": {"n1": "A: too hot"}}},
                {"name": "B", "args": {"reject": {"n1": "B: too cold", "n2": "unresolvable"}}},
            ],
        }
    )
    state = CycleState()
    out = run_filter(fw, state, {}, NODES)
    assert out.passed == ["n3"]
    assert out.failed == {"n1": "A: too hot"}
    assert out.unresolvable == {"n2": "B says never"}
    assert out.rejected_by == {"A": 1, "B": 1}


def test_pre_filter_skip_skips_that_plugins_filter() -> None:
    fw = framework(
        {
            "plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "A"}]}},
            "pluginConfig": [{"name": "A", "args": {"reject": {"n1": "no"}}}],
        }
    )
    state = CycleState()
    assert fw.run_pre_filter(state, {"skip": "A"}) == (None, None)
    assert run_filter(fw, state, {"skip": "A"}, NODES).passed == ["n1", "n2", "n3"]


def test_scores_combined_and_scaled() -> None:
    # A weight 3 scores 100/40/0, N weight 1 normalizes 10/5/0 to 100/50/0:
    # n1 (300+100)/40 = 10; n2 (120+50)/40 = 4.25 -> 4; n3 0
    fw = framework(
        {
            "plugins": {
                "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "A", "weight": 3}, {"name": "N"}]}
            },
            "pluginConfig": [
                {"name": "A", "args": {"scores": {"n1": 100, "n2": 40}}},
                {"name": "N", "args": {"scores": {"n1": 10, "n2": 5}}},
            ],
        }
    )
    assert run_score(fw, CycleState(), {}, NODES) == {"n1": 10, "n2": 4, "n3": 0}
    assert combine_scores([(1, [45]), (1, [50])], 1) == [5]  # 4.75 -> 5
    assert combine_scores([(1, [44])], 1) == [4]  # 4.4 -> 4
    assert combine_scores([(1, [45])], 1) == [5]  # half rounds up
    assert combine_scores([(1, [100])], 1, total_weight=2) == [5]  # a skipped plugin counts 0
    assert combine_scores([], 1) == [0]


def test_out_of_range_score_fails_the_call() -> None:
    fw = framework(
        {
            "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "A"}]}},
            "pluginConfig": [{"name": "A", "args": {"scores": {"n2": 101}}}],
        }
    )
    with pytest.raises(PluginFailure, match=r"n2: score 101 outside 0\.\.100"):
        run_score(fw, CycleState(), {}, NODES)


def test_reserve_failure_unreserves_everyone_in_reverse() -> None:
    fw = framework(
        {
            "plugins": {"reserve": {"disabled": [{"name": "*"}], "enabled": [{"name": "A"}, {"name": "B"}]}},
            "pluginConfig": [{"name": "B", "args": {"fail_reserve": True}}],
        }
    )
    st = fw.run_reserve(CycleState(), {}, "n1")
    assert st is not None and st.plugin == "B" and st.message == "no room"
    a, b = fw.instances["A"], fw.instances["B"]
    assert a.calls == ["reserve n1", "unreserve n1"]
    assert b.calls == ["reserve n1", "unreserve n1"]


class FakeEntryPoint:
    def __init__(self, name: str, target: Any, dist: str = "third-party") -> None:
        self.name, self._target = name, target
        self.value = f"{dist}:{name}"
        self.dist = type("D", (), {"name": dist})()

    def load(self) -> Any:
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


def test_entry_points_join_the_builtins() -> None:
    eps: list[Any] = [FakeEntryPoint("F", FilterOnly)]
    r = plugin_registry(entry_points=lambda: eps)
    assert [(e.name, e.source) for e in r.entries()] == [
        *[(name, "builtin") for name in BUILTIN],
        ("F", "entrypoint:third-party"),
    ]
    dup: list[Any] = [FakeEntryPoint("LoadAwareScheduling", FilterOnly, "copycat")]
    with pytest.raises(PluginError, match="registered twice \\(builtin and entrypoint:copycat\\)"):
        plugin_registry(entry_points=lambda: dup)
    broken: list[Any] = [FakeEntryPoint("X", ImportError("no module named x"))]
    with pytest.raises(PluginError, match=r"'X': entry point .* failed to load"):
        plugin_registry(entry_points=lambda: broken)


def test_the_groups_old_name_still_loads_with_a_deprecation_line(caplog: pytest.LogCaptureFixture) -> None:
    declared: dict[str, list[Any]] = {
        "koord.scheduler_plugins": [FakeEntryPoint("Both", FilterOnly, "new")],
        "koordlet.scheduler_plugins": [
            FakeEntryPoint("Old", FilterOnly, "old"),
            FakeEntryPoint("Both", Fixed),
        ],
    }
    found = group_entry_points(
        ENTRY_POINT_GROUP, DEPRECATED_ENTRY_POINT_GROUPS, select=lambda group: declared[group]
    )
    r = plugin_registry(entry_points=found)
    old, both = r.get("Old"), r.get("Both")
    assert old is not None and old.source == "entrypoint:old"
    assert both is not None and both.factory is FilterOnly
    lines = [rec.getMessage() for rec in caplog.records if "deprecated group" in rec.getMessage()]
    assert lines == [
        "entry point Old (old:Old) is declared in the deprecated group koordlet.scheduler_plugins; "
        "declare it in koord.scheduler_plugins",
        "entry point Both (third-party:Both) is declared in the deprecated group koordlet.scheduler_plugins; "
        "declare it in koord.scheduler_plugins",
    ]
