"""Feature gates and typed command-line options: :class:`FeatureSpec`, :class:`Flag`, :class:`FlagSet`.

A QoS plugin's gate key is its ``name``; its :class:`FeatureSpec` gives the default and the stage, as
Kubernetes' ``featuregate.FeatureSpec``. Each :class:`Flag` a plugin declares becomes ``--<name>`` of
``koordlet run`` (also ``KOORDLET_<NAME>`` and the ``--config`` key ``<name>``); the agent parses the value
with the flag's type, and the plugin reads it back, typed, with ``ctx.option(flag)``. The processes'
shared options (the HTTP endpoint's TLS and delegated auth) are declared with the same types.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from koordshared.runtime.errors import PluginError

OptionValue = bool | int | float | str
"""What an option holds: the four types a :class:`Flag` may have."""

T_co = TypeVar("T_co", bound=OptionValue, covariant=True)


class Stage(enum.StrEnum):
    """Kubernetes feature maturity; ``AllAlpha``/``AllBeta`` switch every gate of that stage."""

    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"
    DEPRECATED = "Deprecated"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """A gate's default state and stage, as Kubernetes' ``featuregate.FeatureSpec``."""

    default: bool
    stage: Stage = Stage.ALPHA
    lock_to_default: bool = False
    """A locked gate (GA) cannot be changed from its default."""


FlagType = type[int] | type[float] | type[str] | type[bool]


@dataclass(frozen=True, slots=True)
class Flag(Generic[T_co]):
    """One command-line option a plugin declares; it becomes ``--<name>`` of ``koordlet run``.

    ``Flag("cpu-suppress-interval-seconds", float, 1.0, "...")``: a ``float`` flag takes seconds or a Go
    duration (``500ms``). Read the parsed value with ``ctx.option(flag)``, typed as the flag.
    """

    name: str
    """kebab-case, without the leading dashes."""
    type: type[T_co]
    default: T_co
    help: str = ""

    def accepts(self, value: OptionValue) -> bool:
        """Whether ``value`` has this flag's type (an ``int`` is a ``float``; a ``bool`` is no number)."""
        if self.type is bool or isinstance(value, bool):
            return self.type is bool and isinstance(value, bool)
        if self.type is float:
            return isinstance(value, int | float)
        return isinstance(value, self.type)


class FlagSet:
    """The flags a plugin adds in ``init_flags`` (Go's ``*flag.FlagSet``)."""

    def __init__(self, owner: str = "") -> None:
        self.owner = owner
        self._flags: dict[str, Flag[OptionValue]] = {}

    def add(self, flag: Flag[OptionValue]) -> None:
        """Declare a flag; a bad or twice-declared name, or a default of another type, is a
        :class:`PluginError`."""
        if not flag.name or flag.name.startswith("-") or " " in flag.name:
            raise PluginError(self.owner, f"bad flag name {flag.name!r}: use kebab-case without dashes")
        if flag.name in self._flags:
            raise PluginError(self.owner, f"flag --{flag.name} declared twice")
        if flag.type not in (bool, int, float, str):
            raise PluginError(self.owner, f"flag --{flag.name}: type must be bool, int, float or str")
        if not flag.accepts(flag.default):
            raise PluginError(
                self.owner, f"flag --{flag.name}: default {flag.default!r} is not a {flag.type.__name__}"
            )
        self._flags[flag.name] = flag

    def __iter__(self) -> Iterator[Flag[OptionValue]]:
        return iter(self._flags.values())

    def __len__(self) -> int:
        return len(self._flags)

    def __contains__(self, name: object) -> bool:
        return name in self._flags
