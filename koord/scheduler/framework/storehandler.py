"""What a plugin gives a cache it watched (:meth:`~.interface.Store.add_handler`) to be told of changes."""

from __future__ import annotations

from dataclasses import dataclass

from koord.scheduler.framework.interface import ObjHandler, UpdateHandler


@dataclass(frozen=True, slots=True)
class StoreHandler:
    """``on_add(obj)``, ``on_update(old, new)`` (also on a resync: ``old is new``), ``on_delete(obj)``."""

    on_add: ObjHandler | None = None
    on_update: UpdateHandler | None = None
    on_delete: ObjHandler | None = None
