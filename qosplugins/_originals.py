"""What a node QoS plugin found before it wrote, so it can put it back: when its policy stops asking for
a value (a class disabled, a pod's policy ``none``, a device dropped) and at stop.

Sees only :mod:`koordlet.api`. A plugin describes each pass as the values it wants, each at its level
(``0`` tier, ``1`` pod, ``2`` container); :meth:`Originals.plan` reads the value of every key it has not
seen yet, remembers it, and adds a write of the original for every key no longer wanted. The plan is
leveled, so the executor orders growth and shrink across the hierarchy for wants and restores alike.
A key is ``(resource, cgroup dir, item)``, the item naming a device in per-device files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from koordlet import api

LEVELS = 3

Key = tuple[str, str, str]
Reader = Callable[[api.CgroupUpdate], str | None]
"""The value ``update``'s key holds now, in the form the update's value takes; ``None`` when it cannot
be known (the cgroup is gone, the kernel lacks the file): the value is then not written at all."""


@dataclass(frozen=True, slots=True)
class Want:
    update: api.CgroupUpdate
    level: int
    item: str = ""
    """What distinguishes values of one file (the ``major:minor`` of a per-device line)."""

    @property
    def key(self) -> Key:
        return (self.update.resource, self.update.cgroup_dir, self.item)


@dataclass(slots=True)
class _Found:
    level: int
    update: api.CgroupUpdate
    """The write that puts the original back."""


class Originals:
    """The originals of one plugin's keys."""

    def __init__(self, read: Reader) -> None:
        self._read = read
        self._found: dict[Key, _Found] = {}

    def plan(self, wants: Sequence[Want], *, reason: str = "restore") -> list[list[api.CgroupUpdate]]:
        """Levels to hand to ``leveled_update``: the wants whose original is known, and the restores of
        keys not wanted any more (then forgotten)."""
        levels: list[list[api.CgroupUpdate]] = [[] for _ in range(LEVELS)]
        keys: set[Key] = set()
        for w in wants:
            if w.key not in self._found:
                original = self._read(w.update)
                if original is None:
                    continue
                self._found[w.key] = _Found(w.level, replace(w.update, value=original, reason=reason))
            keys.add(w.key)
            levels[w.level].append(w.update)
        for key in [k for k in self._found if k not in keys]:
            found = self._found.pop(key)
            levels[found.level].append(found.update)
        return levels

    def restore_all(self, *, reason: str = "restore") -> list[list[api.CgroupUpdate]]:
        """Levels writing every original back; everything is forgotten."""
        return self.plan((), reason=reason)

    def __len__(self) -> int:
        return len(self._found)
