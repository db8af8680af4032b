"""The ``koordlet`` command: ``run``, ``plugins list``, ``version``, ``top`` (:mod:`koordlet.top`), ``demo``
(:mod:`koordlet.demo`).

Plugins are discovered before click parses anything, so each plugin's flags become options of
``koordlet run`` and show in its ``--help``. Go-style single-dash long flags (``-feature-gates=...``, as in
koordlet's DaemonSet args) and ``--bool-flag=true`` are accepted; so is koordlet's own command line
without a subcommand (``koordlet -addr=:9316 ...`` is ``koordlet run``), and every koordlet or klog flag
this agent does not implement (:mod:`koordlet.compatflags`), each with one warning at start, as is every
feature gate that is on without an implementation. Bad flags, gates or values exit 2 with a message naming
the problem. The one stop ``threading.Event`` of the agent is made here.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Sequence
from typing import Any

import click

from koordlet import api, compatflags, config, featuregates
from koordlet.qosmanager import loader
from koordshared import __version__
from koordshared.runtime.errors import ConfigError, PluginError
from koordshared.runtime.lifecycle import install_signals

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class Seconds(click.ParamType):  # type: ignore[type-arg]
    """Seconds as a number or a Go duration (``500ms``, ``1s``, ``2m``); never negative."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = config.parse_seconds(value)
        except ConfigError as err:
            self.fail(str(err), param, ctx)
        if seconds < 0:
            self.fail(f"{value!r} is negative: a duration here is an interval or a wait", param, ctx)
        return seconds


def _param(name: str) -> str:
    return name.replace("-", "_")


def flag_option(flag: api.Flag[api.OptionValue], *, owner: str = "") -> click.Option:
    """An ``api.Flag`` as a click option with its ``KOORDLET_*`` environment variable."""
    help_text = flag.help + (f" [plugin {owner}]" if owner else "")
    common: dict[str, Any] = {"envvar": config.env_name(flag.name), "show_default": True, "help": help_text}
    if flag.type is bool:
        return click.Option(
            [f"--{flag.name}/--no-{flag.name}", _param(flag.name)], default=bool(flag.default), **common
        )
    ptype: Any = Seconds() if flag.type is float else flag.type
    return click.Option([f"--{flag.name}", _param(flag.name)], type=ptype, default=flag.default, **common)


def normalize_args(
    args: Sequence[str],
    entries: Sequence[loader.PluginEntry],
    foreign: list[compatflags.Foreign] | None = None,
) -> list[str]:
    """Accept Go spellings of the agent's and the plugins' flags: ``-name=v`` → ``--name=v``;
    ``--b=true``/``false`` → ``--b``/``--no-b``. koordlet's and klog's flags the agent lacks are taken
    out into ``foreign`` (when given; otherwise click refuses them)."""
    flags = [*config.AGENT_FLAGS, *(f for e in entries for f in e.flags)]
    long_names = {f.name for f in flags} | {"config"}
    bool_names = {f.name for f in flags if f.type is bool}
    if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
        args = ["run", *args]  # koordlet's own command line has no subcommand
    if foreign is not None:
        args, found = compatflags.take_foreign(args, long_names | {"v"})
        foreign.extend(found)
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            out.extend(args[index:])
            break
        name, eq, value = arg.lstrip("-").partition("=")
        dashes = len(arg) - len(arg.lstrip("-"))
        if dashes in (1, 2) and name == "v" and eq:
            out.extend(["-v", value])
            continue
        if dashes in (1, 2) and name in long_names:
            if name in bool_names and eq:
                try:
                    on = featuregates.parse_bool(name, value, flag=f"--{name}")
                except ConfigError as err:
                    raise click.UsageError(str(err)) from err
                out.append(f"--{name}" if on else f"--no-{name}")
                continue
            out.append(f"--{name}{eq}{value}")
            continue
        out.append(arg)
    return out


def _gates(
    entries: Sequence[loader.PluginEntry], feature: str, ext: str
) -> tuple[featuregates.FeatureGate, featuregates.FeatureGate]:
    gates = featuregates.koordlet_gates({e.name: e.spec for e in entries if e.builtin})
    ext_gates = featuregates.FeatureGate({}, flag="--qos-extension-plugins")
    for entry in entries:
        if not entry.builtin:
            ext_gates.add(entry.name, entry.spec)
    gates.set_from_string(feature)
    ext_gates.set_from_string(ext)
    return gates, ext_gates


def _load_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value:
        known = {p.name.replace("_", "-") for p in ctx.command.params if p.name}
        try:
            data = config.load_config_file(value, known)
        except ConfigError as err:
            raise click.BadParameter(str(err)) from err
        ctx.default_map = {**(ctx.default_map or {}), **{_param_key(k): v for k, v in data.items()}}
    return value


def _param_key(name: str) -> str:
    return _param(name)


def _startup_warnings(
    ctx: click.Context, entries: Sequence[loader.PluginEntry], gates: featuregates.FeatureGate
) -> None:
    """One warning per koordlet/klog flag without effect here and per gate on without implementation."""
    log = logging.getLogger("koordlet.cli")
    found = ctx.find_root().obj or []
    for message in compatflags.warnings(found):
        log.warning("%s", message)
    builtin = {g for e in entries if e.builtin for g in e.gates}
    for name in featuregates.unimplemented_enabled(gates, builtin):
        how = "set" if name in gates.explicit() else "on by default or by AllAlpha/AllBeta"
        log.warning("feature gate %s is %s but not implemented by this agent: no effect", name, how)


class _LazyGroup(click.Group):
    """A group whose commands in ``lazy`` (name: ``module:attribute``) are imported when asked for: the
    agent (``koordlet run``, the DaemonSet) then never loads ``top`` and ``demo``, nor the test kit the
    demo runs on."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self._lazy.get(cmd_name)
        if target is not None and cmd_name not in self.commands:
            module, attribute = target.split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


def build_cli(entries: Sequence[loader.PluginEntry]) -> click.Group:
    @click.group(
        cls=_LazyGroup,
        context_settings=CONTEXT,
        lazy={"top": "koordlet.top.command:top", "demo": "koordlet.demo.command:demo"},
    )
    def cli() -> None:
        """koordlet: a node agent for Kubernetes colocation of latency-sensitive and best-effort pods."""

    @cli.command("run", context_settings=CONTEXT)
    @click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        is_eager=True,
        expose_value=False,
        callback=_load_config,
        envvar="KOORDLET_CONFIG",
        help="YAML file with flag names as keys",
    )
    @click.option(
        "-v", "--v", "verbosity", type=int, default=0, envvar="KOORDLET_V", help="log verbosity (klog)"
    )
    def run(verbosity: int, **values: Any) -> None:
        """Run the agent (standalone on this host when no cluster credentials are found)."""
        from koordshared.runtime import logs

        options = {k.replace("_", "-"): v for k, v in values.items()}
        try:
            gates, ext_gates = _gates(
                entries, str(options["feature-gates"]), str(options["qos-extension-plugins"])
            )
            cfg = config.build(options)
        except ConfigError as err:
            raise click.UsageError(str(err)) from err
        logs.setup(verbosity, str(options["log-format"]))
        _startup_warnings(click.get_current_context(), entries, gates)
        from koordlet import daemon

        stop = threading.Event()
        with install_signals(stop):
            try:
                agent = daemon.new_daemon(cfg, entries, gates, ext_gates, stop)
            except ConfigError as err:
                click.echo(f"Error: {err}", err=True)
                sys.exit(2)
            code = agent.run(stop)
        sys.exit(code)

    for flag in config.AGENT_FLAGS:
        run.params.append(flag_option(flag))
    for entry in entries:
        for flag in entry.flags:
            run.params.append(flag_option(flag, owner=entry.name))

    @cli.group("plugins", context_settings=CONTEXT)
    def plugins() -> None:
        """Inspect QoS plugins."""

    @plugins.command("list", context_settings=CONTEXT)
    @click.option("--feature-gates", default="", envvar="KOORDLET_FEATURE_GATES", help="as for run")
    @click.option(
        "--qos-extension-plugins", default="", envvar="KOORDLET_QOS_EXTENSION_PLUGINS", help="as for run"
    )
    def plugins_list(feature_gates: str, qos_extension_plugins: str) -> None:
        """Every plugin, then every other koordlet gate (honoured by the agent, or not implemented):
        name, source, stage, default and whether it is enabled."""
        try:
            gates, ext_gates = _gates(entries, feature_gates, qos_extension_plugins)
        except ConfigError as err:
            raise click.UsageError(str(err)) from err
        rows = [("NAME", "SOURCE", "STAGE", "DEFAULT", "ENABLED")]
        for e in entries:
            on = (gates if e.builtin else ext_gates).enabled(e.name)
            rows.append((e.name, e.source, str(e.spec.stage), str(e.spec.default).lower(), str(on).lower()))
        plugins = {e.name for e in entries if e.builtin}
        served = {g: e.name for e in entries if e.builtin for g in e.serves}
        for g in gates.states(n for n in gates.known() if n not in plugins):
            source = (
                f"plugin {served[g.name]}" if g.name in served else featuregates.source_of(g.name, plugins)
            )
            spec = g.spec
            rows.append((g.name, source, str(spec.stage), str(spec.default).lower(), str(g.enabled).lower()))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())

    @cli.command("version", context_settings=CONTEXT)
    def version() -> None:
        """Print the version, the plugin API version and whether the C helpers are compiled."""
        from koordlet.system import native

        helpers = "compiled" if native.HAS_NATIVE else "absent (pure-Python fallback)"
        click.echo(f"koordlet {__version__}\nplugin API {api.API_VERSION}\nnative helpers: {helpers}")

    return cli


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        entries = loader.discover()
    except PluginError as err:
        if args[:1] != ["version"]:
            click.echo(f"Error: {err}", err=True)
            sys.exit(2)
        entries = []
    cli = build_cli(entries)
    foreign: list[compatflags.Foreign] = []
    try:
        args = normalize_args(args, entries, foreign)
    except click.UsageError as err:
        err.show()
        sys.exit(2)
    cli.main(args=args, prog_name="koordlet", obj=foreign)
