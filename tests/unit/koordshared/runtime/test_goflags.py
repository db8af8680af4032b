"""Go command lines on every cluster process (``koordshared.runtime.goflags``): Go spellings of a command's
own options, booleans written ``--flag=true/false``, and the flags of Go components that mean nothing
here taken out and named once."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from koord.descheduler import cli as descheduler_cli
from koord.manager import cli as manager_cli
from koord.scheduler import cli as scheduler_cli
from koord.scheduler.extender import cli as extender_cli
from koordshared.kube.componentflags import COMPONENT_BASE
from koordshared.runtime import goflags


@click.command()
@click.option("--leader-elect/--no-leader-elect", default=None)
@click.option("--enable-leader-election/--disable-leader-election", default=True)
@click.option("--list-plugins", is_flag=True)
@click.option("--config", default="")
@click.option("-v", "--v", "verbosity", type=int, default=0)
def sample(**values: Any) -> None:
    click.echo(repr(sorted(values.items())))


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--leader-elect=false"], ["--no-leader-elect"]),
        (["--leader-elect=true"], ["--leader-elect"]),
        (["-leader-elect=0"], ["--no-leader-elect"]),
        (["--leader-elect=T"], ["--leader-elect"]),
        (["-leader-elect"], ["--leader-elect"]),
        (["--enable-leader-election=false"], ["--disable-leader-election"]),
        (["--list-plugins=false"], []),
        (["--list-plugins=true"], ["--list-plugins"]),
        (["-config=/c", "-config", "/d"], ["--config=/c", "--config", "/d"]),
        (["-v=4", "--v=2", "-v", "3"], ["--v=4", "--v=2", "-v", "3"]),
        (["--", "-config=x"], ["--", "-config=x"]),
    ],
)
def test_go_spellings_become_clicks(args: list[str], want: list[str]) -> None:
    assert goflags.go_syntax(args, sample) == want


def test_a_boolean_given_a_word_is_refused_naming_it() -> None:
    with pytest.raises(click.UsageError, match="--leader-elect: 'maybe' is not a boolean"):
        goflags.go_syntax(["--leader-elect=maybe"], sample)


def test_foreign_flags_are_taken_with_their_values_and_named_once() -> None:
    own = goflags.option_names(sample)
    args = [
        "--bind-address=0.0.0.0",
        "-secure-port",
        "10259",
        "--authentication-skip-lookup",
        "--profiling=F",
        "--logtostderr=true",
        "--config=/c",
        "--secure-port=10260",
    ]
    kept, found = goflags.take_foreign(args, (goflags.KLOG_TABLE, COMPONENT_BASE), own)
    assert kept == ["--config=/c"]
    assert [(f.name, f.value) for f in found] == [
        ("bind-address", "0.0.0.0"),
        ("secure-port", "10259"),
        ("authentication-skip-lookup", "true"),
        ("profiling", "false"),
        ("logtostderr", "true"),
        ("secure-port", "10260"),
    ]
    named = [w.split(":", 1)[0] for w in goflags.warnings(found)]
    # The last value wins as in Go; logtostderr=true asks for what we do: not named.
    assert named == [
        "--bind-address=0.0.0.0",
        "--authentication-skip-lookup=true",
        "--profiling=false",
        "--secure-port=10260",
    ]


def test_a_commands_own_option_is_never_taken_for_a_foreign_one() -> None:
    kept, found = goflags.take_foreign(["--client-ca-file=/ca"], (COMPONENT_BASE,), {"client-ca-file"})
    assert kept == ["--client-ca-file=/ca"] and found == []


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (manager_cli.main, ["--enable-leader-election=false", "--metrics-addr=:0", "--sync-period=0"]),
        (scheduler_cli.main, ["--leader-elect=false", "--port=0"]),
        (descheduler_cli.main, ["--leader-elect=false", "--port=0"]),
    ],
)
def test_every_cluster_process_takes_go_booleans(command: click.Command, args: list[str]) -> None:
    rewritten = goflags.go_syntax(args, command)
    ctx = command.make_context("x", rewritten)
    flag = "enable_leader_election" if "enable_leader_election" in ctx.params else "leader_elect"
    assert ctx.params[flag] is False


def test_the_extender_names_kube_schedulers_flags_and_leader_election_without_failing() -> None:
    own = goflags.option_names(extender_cli.main)
    args = ["--leader-elect=false", "--bind-address=0.0.0.0", "--tls-cert-file=/t", "--v=4"]
    kept, found = goflags.take_foreign(
        args, (goflags.KLOG_TABLE, COMPONENT_BASE, extender_cli.NO_ELECTION), own
    )
    assert kept == ["--tls-cert-file=/t", "--v=4"]  # the extender's own TLS flag stays its own
    assert [f.name for f in found] == ["leader-elect", "bind-address"]


def test_an_unknown_flag_outside_every_table_is_still_refused() -> None:
    result = CliRunner().invoke(scheduler_cli.main, ["--no-such-flag=1"])
    assert result.exit_code == 2 and "no-such-flag" in result.output
