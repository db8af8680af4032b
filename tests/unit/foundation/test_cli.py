"""The command line: exit codes and messages, plugin flags in --help, precedence flags > env > file."""

from __future__ import annotations

import importlib.metadata
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from koordlet import api, cli
from koordlet.config import Configuration
from koordlet.qosmanager import loader
from tests.unit.foundation import plugins_sample as ps


def make_cli(
    builtins: list[Any] | None = None, eps: list[importlib.metadata.EntryPoint] | None = None
) -> Any:
    entries = loader.discover(builtins or [ps.Good], entry_points=lambda: eps or [], registered={})
    return cli.build_cli(entries), entries


def invoke(args: list[str], env: dict[str, str] | None = None, **kw: Any) -> Any:
    group, _ = make_cli(**kw)
    return CliRunner().invoke(group, args, env=env or {}, catch_exceptions=False)


@pytest.mark.parametrize(
    ("gate", "needle"),
    [("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"), ("BECPUSuppress=maybe", "'maybe'")],
)
def test_bad_gates_exit_2_naming_the_problem(gate: str, needle: str) -> None:
    result = invoke(["run", f"--feature-gates={gate}"])
    assert result.exit_code == 2
    assert needle in result.output
    if "NoSuchGate" in gate:
        assert "BECPUSuppress" in result.output  # lists the known gates


def test_unknown_flag_exits_2() -> None:
    result = invoke(["run", "--no-such-flag=1"])
    assert result.exit_code == 2 and "no-such-flag" in result.output


def test_plugin_flags_show_in_run_help() -> None:
    result = invoke(["run", "--help"])
    assert result.exit_code == 0
    assert "--good-interval-seconds" in result.output and "[plugin Good]" in result.output
    assert "--feature-gates" in result.output and "--cgroup-root-dir" in result.output


def test_plugins_list_shows_source_stage_default_and_state() -> None:
    eps = [
        importlib.metadata.EntryPoint(
            "Second", "tests.unit.foundation.plugins_sample:Second", loader.ENTRY_POINT_GROUP
        )
    ]
    result = invoke(
        ["plugins", "list", "--feature-gates=Good=false", "--qos-extension-plugins=Second=true"], eps=eps
    )
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()[1:]}
    assert rows["Good"] == ["Good", "builtin", "Beta", "true", "false"]
    assert rows["Second"][1].startswith("entrypoint:") and rows["Second"][-1] == "true"


def test_extension_gate_names_unknown_plugin() -> None:
    result = invoke(["plugins", "list", "--qos-extension-plugins=Nope=true"])
    assert result.exit_code == 2 and "Nope" in result.output


def test_version() -> None:
    result = invoke(["version"])
    assert result.exit_code == 0, result.output
    assert f"plugin API {api.API_VERSION}" in result.output and "native helpers" in result.output


def test_precedence_flags_over_env_over_file_over_defaults(
    tmp_path: Path, captured: list[Configuration]
) -> None:
    conf = tmp_path / "koordlet.yaml"
    conf.write_text(
        "addr: 127.0.0.1:1001\ntsdb-path: /from/file\n"
        "reconcile_interval_seconds: 7\ngood-interval-seconds: 3s\n"
    )
    env = {"KOORDLET_ADDR": "127.0.0.1:1002", "KOORDLET_TSDB_PATH": "/from/env", "NODE_NAME": "n1"}
    result = invoke(["run", f"--config={conf}", "--addr=127.0.0.1:1003"], env=env)
    assert result.exit_code == 0, result.output
    cfg = captured[0]
    assert cfg.addr == "127.0.0.1:1003"  # flag beats env and file
    assert str(cfg.cache.tsdb_path) == "/from/env"  # env beats file
    assert cfg.qos.agent.reconcile_interval == 7  # file beats default
    assert cfg.options["good-interval-seconds"] == 3.0  # plugin flags take Go durations from the file
    assert cfg.advisor.collect_interval == 1.0  # default
    assert cfg.node_name == "n1"


def test_go_style_single_dash_and_bool_values(captured: list[Configuration]) -> None:
    group, entries = make_cli()
    args = cli.normalize_args(
        ["run", "-only-evict-by-api=true", "-collect-res-used-interval=500ms", "--v=4", "-dry-run=false"],
        entries,
    )
    assert args == [
        "run",
        "--only-evict-by-api",
        "--collect-res-used-interval=500ms",
        "-v",
        "4",
        "--no-dry-run",
    ]
    result = CliRunner().invoke(group, args, env={"NODE_NAME": "n1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert captured[0].qos.only_evict_by_api and captured[0].advisor.collect_interval == 0.5


def test_bad_config_file_exits_2(tmp_path: Path, captured: list[Configuration]) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("nope: 1\n")
    result = invoke(["run", f"--config={conf}"])
    assert result.exit_code == 2 and "nope" in result.output and not captured


def test_a_negative_duration_is_refused(captured: list[Configuration]) -> None:
    result = invoke(["run", "--good-interval-seconds=-1"], env={"NODE_NAME": "n1"})
    assert result.exit_code == 2 and "negative" in result.output and not captured


def test_run_restores_the_signal_handlers_it_found(captured: list[Configuration]) -> None:
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    result = invoke(["run"], env={"NODE_NAME": "n1"})
    assert result.exit_code == 0 and captured
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
