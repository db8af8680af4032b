"""The command line: exit codes and messages, plugin flags in --help, precedence flags > env > file."""

from __future__ import annotations

import importlib.metadata
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from koordlet import api, cli, compatflags
from koordlet.config import Configuration
from koordlet.qosmanager import loader
from tests.unit.koordlet.qosmanager import plugins_sample as ps


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
        assert "BECPUManager" in result.output  # lists the known gates


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
            "Second", "tests.unit.koordlet.qosmanager.plugins_sample:Second", loader.ENTRY_POINT_GROUP
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


CHART_ARGS = [
    # koordinator-sh/charts v1.8.0 templates/koordlet.yaml: the container's args, defaults rendered
    "-addr=:9316",
    "-cgroup-root-dir=/host-cgroup/",
    "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true",
    "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
    "--logtostderr=true",
    "--v=4",
]


def test_koordinator_chart_args_start_the_agent_with_one_warning_each(captured: list[Configuration]) -> None:
    """The chart's argument list (no subcommand) starts the agent; the flag without
    an implementation is named once, ``--logtostderr=true`` (what we do anyway) not at all, and each
    gate that is on without an implementation gets one line."""
    import qosplugins

    group, entries = make_cli(builtins=list(qosplugins.BUILTIN))
    foreign: list[Any] = []
    args = cli.normalize_args(CHART_ARGS, entries, foreign)
    assert args[0] == "run"
    result = CliRunner().invoke(group, args, env={"NODE_NAME": "n1"}, obj=foreign, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    cfg = captured[0]
    assert (cfg.host, cfg.port, str(cfg.paths.cgroup_root)) == ("", 9316, "/host-cgroup")
    lines = [line for line in result.output.splitlines() if " koordlet.cli] " in line]
    assert sum("--runtime-hooks-host-endpoint=" in line for line in lines) == 1
    assert not any("logtostderr" in line for line in lines)
    gated = sorted(line.split("feature gate ")[1].split()[0] for line in lines if "feature gate " in line)
    # CgroupReconcile, also on by the chart, is a plugin; the gates on by default (NodeTopologyReport and
    # the runtime hooks GroupIdentity, CPUSetAllocator, BatchResource) are the agent's own
    assert gated == ["Accelerators"]
    assert len(lines) == 1 + len(gated)


@pytest.mark.parametrize(
    ("argv", "kept", "found"),
    [
        (["-kube-api-qps", "50", "-v", "2"], ["-v", "2"], [("kube-api-qps", "50")]),
        (["--enable-pod-taskids", "--tsdb-path=/x"], ["--tsdb-path=/x"], [("enable-pod-taskids", "true")]),
        (["-enable-nri-runtime-hook=f"], [], [("enable-nri-runtime-hook", "false")]),
        (
            ["--log_dir=/var/log", "-alsologtostderr"],
            [],
            [("log_dir", "/var/log"), ("alsologtostderr", "true")],
        ),
        (["--no-such-flag=1"], ["--no-such-flag=1"], []),  # not koordlet's: click refuses it (exit 2)
        (["--", "-kube-api-qps=x"], ["--", "-kube-api-qps=x"], []),
    ],
)
def test_foreign_flags_are_taken_with_their_values(
    argv: list[str], kept: list[str], found: list[tuple[str, str]]
) -> None:
    rest, taken = compatflags.take_foreign(argv, {"tsdb-path", "v"})
    assert rest == kept
    assert [(f.name, f.value) for f in taken] == found


def test_plugins_list_shows_gates_without_implementation() -> None:
    result = invoke(["plugins", "list", "--feature-gates=Accelerators=true"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()[1:]}
    assert "not implemented" in rows["Accelerators"] and rows["Accelerators"].rstrip().endswith("true")
    assert " agent " in rows["BECPUManager"] and "NetQOS" not in rows


def test_gates_the_built_in_evictors_serve_are_listed_as_theirs() -> None:
    """CPUEvict/CPUAllocatableEvict (MemoryEvict/MemoryAllocatableEvict) are implemented by the
    CPU (memory) evictor plugin, no longer "not implemented"."""
    import qosplugins

    result = invoke(["plugins", "list", "--feature-gates=CPUEvict=true"], builtins=list(qosplugins.BUILTIN))
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines()[1:]}
    for gate, plugin in (
        ("CPUEvict", "BECPUEvict"),
        ("CPUAllocatableEvict", "BECPUEvict"),
        ("MemoryEvict", "BEMemoryEvict"),
        ("MemoryAllocatableEvict", "BEMemoryEvict"),
    ):
        assert rows[gate][1:3] == ["plugin", plugin], rows[gate]
    assert rows["CPUEvict"][-1] == "true" and rows["BECPUEvict"][-1] == "false"


def test_the_agent_command_loads_neither_top_nor_demo() -> None:
    """``koordlet run`` imported the ``top`` and ``demo`` commands and the test kit the demo runs on
    (30 modules, ~1.7 MiB of the DaemonSet's RSS) only to list them; now they load when asked for."""
    probe = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from koordlet import cli\n"
        "group = cli.build_cli([])\n"
        "assert CliRunner().invoke(group, ['run', '--help']).exit_code == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith(('koordlet.demo', 'koordlet.top', "
        "'koordlet.testing'))))\n"
        "assert CliRunner().invoke(group, ['top', '--help']).exit_code == 0\n"
        "print('koordlet.top.command' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]
