"""Configuration: durations, validation, config-file keys, node name."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet import config
from koordshared.runtime.errors import ConfigError


def defaults(**over: object) -> dict[str, object]:
    values: dict[str, object] = {f.name: f.default for f in config.AGENT_FLAGS}
    values.update({k.replace("_", "-"): v for k, v in over.items()})
    return values


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1", 1.0), ("0.5", 0.5), ("500ms", 0.5), ("1s", 1.0), ("2m", 120.0), ("1m30s", 90.0), (3, 3.0)],
)
def test_parse_seconds(text: object, seconds: float) -> None:
    assert config.parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["fast", "1x", "s", "1s junk", True, "5m 3s", "1d", "-1s"])
def test_parse_seconds_refuses_garbage(text: object) -> None:
    with pytest.raises(ConfigError):
        config.parse_seconds(text)


def test_build_defaults_and_node_name_from_env() -> None:
    cfg = config.build(defaults(), environ={"NODE_NAME": "node-7"})
    assert cfg.node_name == "node-7"
    assert cfg.port == 9316 and cfg.host == "127.0.0.1"
    chart = config.build({**defaults(), "addr": ":9316"}, environ={"NODE_NAME": "n"})
    assert (chart.host, chart.port) == ("", 9316)  # Koordinator's chart: every interface, as Go binds
    assert cfg.advisor.collect_interval == 1.0
    assert str(cfg.paths.cgroup_root) == "/sys/fs/cgroup"


def test_build_gives_every_component_its_config_from_the_flags() -> None:
    cfg = config.build(
        defaults(
            collect_res_used_interval="2s",
            fast_sample_interval=0.0,
            psi_collector_interval=30.0,
            collect_sys_metric_outdated_interval="20s",
            reconcile_interval_seconds=3,
            resource_force_update_seconds=90,
            audit_max_events_limit=10,
            tsdb_path="",
            tsdb_max_bytes=1 << 20,
            kubelet_sync_interval="5s",
            only_evict_by_api=True,
            dry_run=True,
            standalone=True,
        ),
        environ={"NODE_NAME": "node-x"},
    )
    adv = cfg.advisor
    assert (adv.node_name, adv.collect_interval, adv.fast_sample_interval, adv.psi_interval) == (
        "node-x",
        2.0,
        0.0,
        30.0,
    )
    assert adv.sys_metric_outdated_interval == 20.0 and adv.be_interval == adv.host_app_interval == 2.0
    ex = cfg.executor
    assert (ex.force_update_seconds, ex.audit_size, ex.dry_run) == (90, 10, True)
    assert cfg.cache.tsdb_path is None and cfg.cache.tsdb_max_bytes == 1 << 20
    assert cfg.cache.collect_interval == 2.0
    assert cfg.informer.node_name == "node-x" and cfg.informer.standalone is True
    assert cfg.informer.kubelet_sync_interval == 5.0
    assert cfg.qos.agent.reconcile_interval == 3.0 and cfg.qos.agent.collect_interval == 2.0
    assert cfg.qos.only_evict_by_api and cfg.qos.dry_run


def test_in_cluster_without_node_name_is_an_error() -> None:
    with pytest.raises(ConfigError, match="NODE_NAME"):
        config.build(defaults(), environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"collect-res-used-interval": 0.05}, "100ms"),
        ({"addr": "9316"}, "--addr"),
        ({"addr": "$(POD_IP):9316"}, "--addr"),
        ({"cgroup-driver": "lxc"}, "--cgroup-driver"),
        ({"log-format": "xml"}, "--log-format"),
        ({"collect-cpi-timewindow": "60s"}, "--collect-cpi-timewindow"),
        ({"resctrl-collector-interval": 0}, "--resctrl-collector-interval"),
        ({"node-metric-report-min-interval": 0}, "--node-metric-report-min-interval"),
    ],
)
def test_bad_values_name_the_flag(over: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        config.build(defaults(**over), environ={})


def test_config_file_keys_kebab_snake_and_gate_maps(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("addr: 127.0.0.1:1\ncollect_res_used_interval: 500ms\nfeature-gates: {CPUBurst: false}\n")
    known = {fl.name for fl in config.AGENT_FLAGS}
    data = config.load_config_file(str(f), known)
    assert data == {
        "addr": "127.0.0.1:1",
        "collect-res-used-interval": "500ms",
        "feature-gates": "CPUBurst=false",
    }


def test_config_file_unknown_key_and_bad_yaml(tmp_path: Path) -> None:
    known = {fl.name for fl in config.AGENT_FLAGS}
    bad = tmp_path / "bad.yaml"
    bad.write_text("no-such-flag: 1\n")
    with pytest.raises(ConfigError, match="no-such-flag"):
        config.load_config_file(str(bad), known)
    bad.write_text("addr: [unclosed\n")
    with pytest.raises(ConfigError, match="YAML"):
        config.load_config_file(str(bad), known)
    with pytest.raises(ConfigError, match="cannot read"):
        config.load_config_file(str(tmp_path / "missing.yaml"), known)
    bad.write_bytes(b"addr: \xff\xfe\n")  # a UnicodeDecodeError escaped as a traceback before
    with pytest.raises(ConfigError, match="not UTF-8"):
        config.load_config_file(str(bad), known)


def test_node_metric_report_floor_reaches_the_informer() -> None:
    cfg = config.build(defaults(**{"node-metric-report-min-interval": "2s"}), environ={"NODE_NAME": "n"})
    assert cfg.informer.report_interval_min_seconds == 2.0 and cfg.informer.status_qps == 0.5
    default = config.build(defaults(), environ={"NODE_NAME": "n"}).informer
    assert default.report_interval_min_seconds == 30.0 and default.status_qps == 0.1


def test_node_qos_collector_flags() -> None:
    cfg = config.build(
        defaults(
            **{
                "cpi-collector-interval": "2m",
                "collect-cpi-timewindow": "5s",
                "enable-resctrl-collector": True,
                "resctrl-collector-interval": "30s",
                "enable-pagecache-collector": True,
            }
        ),
        environ={},
    )
    a = cfg.advisor
    assert (a.cpi_interval, a.cpi_window, a.resctrl_interval) == (120.0, 5.0, 30.0)
    assert a.resctrl_enabled and a.page_cache
    assert not a.cpi_enabled  # the CPICollector gate decides, in the daemon
