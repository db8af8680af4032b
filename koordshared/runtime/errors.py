"""The agent's one error tree.

Every layer raises a subclass of :class:`KoordletError`; ``system/`` translates ``OSError`` into
:class:`CgroupGone` or :class:`ResourceUnsupported` with ``raise ... from err`` (a refused write is an
``UpdateResult`` error, not an exception), so callers never see a bare errno. Stdlib only:
``koordlet.api`` re-exports these for plugins.
"""

from __future__ import annotations


class KoordletError(Exception):
    """Base of every error the agent raises on purpose."""


class ConfigError(KoordletError):
    """Bad command line, configuration file, environment or feature gate: fatal at startup."""


class PluginError(KoordletError):
    """An invalid plugin (duplicate name, missing methods, name/entry-point mismatch)."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"plugin {plugin!r}: {message}")
        self.plugin = plugin


class UnsafePath(KoordletError):
    """A pod UID, container ID or cgroup path that would leave its root, or is malformed."""


class InvalidValue(KoordletError):
    """A value refused by a resource validator before any write."""

    def __init__(self, resource: str, value: object, reason: str) -> None:
        super().__init__(f"invalid value {value!r} for {resource}: {reason}")
        self.resource = resource
        self.value = value
        self.reason = reason


class ResourceUnsupported(KoordletError):
    """The kernel or cgroup version does not offer this resource (e.g. cfs burst on an old kernel)."""


class CgroupGone(KoordletError):
    """The cgroup vanished (pod deleted): a skipped sample or write, never a crash."""


class APIUnavailable(KoordletError):
    """The Kubernetes API server or the kubelet could not be reached."""


class InvalidArgs(KoordletError, ValueError):
    """A cluster-side plugin's args are invalid; the message names the field and what is wrong."""
