"""The errors every process raises on purpose, under one base, :class:`KoordinatorError`.

Stdlib only: the agent's plugin contract re-exports them (``koordlet.api.errors``, which adds the agent's
own host errors and names the base ``KoordletError``), and callers catch the base narrowly instead of a
bare ``Exception``.
"""

from __future__ import annotations


class KoordinatorError(Exception):
    """Base of every error the system's processes raise on purpose."""


class ConfigError(KoordinatorError):
    """Bad command line, configuration file, environment or feature gate: fatal at startup."""


class PluginError(KoordinatorError):
    """An invalid plugin (duplicate name, missing methods, name/entry-point mismatch)."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"plugin {plugin!r}: {message}")
        self.plugin = plugin


class InvalidValue(KoordinatorError):
    """A value refused by a validator (a resource value before any write, an API field)."""

    def __init__(self, resource: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for {resource}: {reason}")
        self.resource = resource
        self.value = value
        self.reason = reason


class APIUnavailable(KoordinatorError):
    """The Kubernetes API server or the kubelet could not be reached."""


class InvalidArgs(KoordinatorError, ValueError):
    """A cluster-side plugin's args are invalid; the message names the field and what is wrong."""
