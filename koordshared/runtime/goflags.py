"""Go command lines on click commands: Koordinator's manifests pass arguments the Go way.

Go's ``flag`` and ``pflag`` accept ``-name`` and ``--name``, ``=value`` or the next argument, a bare
boolean meaning true and ``--b=false``. :func:`go_syntax` rewrites those spellings of a command's own
options into click's. :func:`take_foreign` removes flags of a Go process that have no counterpart here
(klog's, :data:`KLOG`; a process's own tables) before click parses the rest, and :func:`warnings` gives one
line per flag named, so an operator sees what has no effect: never a crash, never silence. A value asking
for what we do anyway (``--logtostderr=true``) needs no warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import click

BOOL, VALUE = "bool", "value"

KLOG: Mapping[str, str] = {
    "logtostderr": BOOL,
    "alsologtostderr": BOOL,
    "log_dir": VALUE,
    "log_file": VALUE,
    "log_file_max_size": VALUE,
    "add_dir_header": BOOL,
    "skip_headers": BOOL,
    "skip_log_headers": BOOL,
    "one_output": BOOL,
    "stderrthreshold": VALUE,
    "legacy_stderr_threshold_behavior": BOOL,
    "vmodule": VALUE,
    "log_backtrace_at": VALUE,
    "log-flush-frequency": VALUE,
}
"""klog's flags (``klog.InitFlags``) but ``-v``, which every process implements."""

KLOG_WHY = "klog flag; this process logs to stderr, verbosity from -v"

NO_OP_VALUES: Mapping[str, str] = {"logtostderr": "true"}
"""Values that ask for what every process does anyway (it always logs to stderr)."""


@dataclass(frozen=True, slots=True)
class ForeignTable:
    """Flags of the Go process we stand in for that mean nothing here, by how Go parses them, and why."""

    flags: Mapping[str, str]
    why: str


KLOG_TABLE = ForeignTable(KLOG, KLOG_WHY)


@dataclass(frozen=True, slots=True)
class Foreign:
    """A foreign flag found on the command line and its value (``true`` for a bare boolean)."""

    name: str
    value: str
    why: str

    @property
    def warning(self) -> str:
        return f"--{self.name}={self.value}: accepted and ignored ({self.why})"


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``; :class:`ValueError` for anything else."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a boolean (true, false, 1, 0, t, f)")


def _bool_text(text: str) -> str:
    try:
        return "true" if parse_bool(text) else "false"
    except ValueError:
        return text.lower()


def take_foreign(
    args: Sequence[str], tables: Sequence[ForeignTable], own: set[str]
) -> tuple[list[str], list[Foreign]]:
    """Split ``args`` into what click parses and the foreign flags it would refuse.

    ``own`` are the names the command declares: those always stay. A foreign flag in ``-name``/``--name``
    form takes ``=value``, or the next argument unless it is a boolean. Everything after ``--`` stays.
    """
    kept: list[str] = []
    found: list[Foreign] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            kept.extend(args[i:])
            break
        dashes = len(arg) - len(arg.lstrip("-"))
        name, eq, value = arg.lstrip("-").partition("=")
        table = None
        if dashes in (1, 2) and name not in own:
            table = next((t for t in tables if name in t.flags), None)
        if table is None:
            kept.append(arg)
            i += 1
            continue
        kind = table.flags[name]
        if not eq:
            if kind == BOOL:
                value = "true"
            elif i + 1 < len(args):
                i += 1
                value = args[i]
        if kind == BOOL:
            value = _bool_text(value)
        found.append(Foreign(name, value, table.why))
        i += 1
    return kept, found


def warnings(found: Sequence[Foreign]) -> list[str]:
    """One warning per foreign flag named (the last value wins, as in Go); no-op and empty values (a
    chart's ``--feature-gates=``) are left out."""
    last: dict[str, Foreign] = {}
    for f in found:
        last.pop(f.name, None)
        last[f.name] = f
    return [f.warning for f in last.values() if NO_OP_VALUES.get(f.name, "") != f.value]


@dataclass(frozen=True, slots=True)
class _Spelling:
    on: str
    off: str | None
    """A boolean's ``--no-x``/``--disable-x`` form; ``None`` for an option taking a value, ``""`` for a
    flag without one (false is leaving it out)."""


def _spellings(command: click.Command) -> dict[str, _Spelling]:
    out: dict[str, _Spelling] = {}
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        boolean = param.is_flag and param.is_bool_flag
        off = (param.secondary_opts[0] if param.secondary_opts else "") if boolean else None
        for opt in param.opts:
            if opt.startswith("-"):
                out.setdefault(
                    opt.lstrip("-"), _Spelling(opt if opt.startswith("--") else "--" + opt[1:], off)
                )
    return out


def option_names(command: click.Command) -> set[str]:
    """The names (without dashes) of ``command``'s options."""
    return set(_spellings(command))


def go_syntax(args: Sequence[str], command: click.Command) -> list[str]:
    """Rewrite Go spellings of ``command``'s options: ``-name=v`` → ``--name=v``, ``-v=4`` → ``--v=4``,
    ``--b=true``/``false`` → ``--b``/its off form. A boolean given a non-boolean value is a
    :class:`click.UsageError` naming it."""
    spellings = _spellings(command)
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            out.extend(args[index:])
            break
        dashes = len(arg) - len(arg.lstrip("-"))
        name, eq, value = arg.lstrip("-").partition("=")
        spelling = spellings.get(name) if dashes in (1, 2) else None
        if spelling is None:
            out.append(arg)
            continue
        if spelling.off is None:
            out.append(f"--{name}{eq}{value}" if len(name) > 1 or eq else arg)
            continue
        if not eq:
            out.append(spelling.on)
            continue
        try:
            on = parse_bool(value)
        except ValueError as err:
            raise click.UsageError(f"--{name}: {err}") from None
        if on:
            out.append(spelling.on)
        elif spelling.off:
            out.append(spelling.off)
    return out
