"""Reservation: Koordinator's resource reservations (``scheduling.koordinator.sh/v1alpha1`` Reservation).

``args`` (fields, defaults, validation), ``cache`` (the available reservations and their owners),
``shared`` (the informers, the reserve pods fed to the scheduler, failures told to the reservation),
``transform`` (BeforePreFilter: matching and the room given back), ``fit`` (Filter), ``nominate``
(nomination and scores), ``plugin`` (the extension points), ``messages`` (what users are told), ``status``
and ``controller`` (the Reservation's status, expiry and garbage collection).
"""

from koord.scheduler.plugins.reservation.plugin import NAME, Reservation

__all__ = ["NAME", "Reservation"]
