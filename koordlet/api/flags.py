"""Feature gates and command-line options of a plugin: :class:`FeatureSpec`, :class:`Flag`, :class:`FlagSet`.

Defined once in :mod:`koordshared.runtime.flags` (stdlib only; the cluster processes declare their shared
options with the same types) and re-exported here. A plugin's gate key is its ``name``; each :class:`Flag` it
declares becomes ``--<name>`` of ``koordlet run`` and is read back, typed, with ``ctx.option(flag)``.
"""

from __future__ import annotations

from koordshared.runtime.flags import FeatureSpec, Flag, FlagSet, FlagType, OptionValue, Stage

__all__ = ["FeatureSpec", "Flag", "FlagSet", "FlagType", "OptionValue", "Stage"]
