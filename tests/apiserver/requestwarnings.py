"""Warnings a request collects on its way through the server, answered as ``Warning`` headers.

kube-apiserver's ``warning.AddWarning(ctx, ...)`` (``apiserver/pkg/warning``): code deep in a write (the
field validation of :mod:`tests.apiserver.fieldvalidation`) adds a message to the request's context, and
the handler sends each one as ``Warning: 299 - "<message>"`` (RFC 7234), which kubectl prints as
``Warning: <message>`` and the official Python client ignores. Writes made outside a request (a test
seeding the store) have nowhere to send them and drop them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_CURRENT: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("request_warnings", default=None)


def add(message: str) -> None:
    """Record a warning for the request being served (ignored outside one); duplicates are kept once."""
    found = _CURRENT.get()
    if found is not None and message not in found:
        found.append(message)


@contextlib.contextmanager
def collecting() -> Iterator[list[str]]:
    """Collect the warnings of the code run inside; the list fills as they are added."""
    found: list[str] = []
    token = _CURRENT.set(found)
    try:
        yield found
    finally:
        _CURRENT.reset(token)


def header_value(message: str) -> str:
    """One ``Warning`` header: code 299, agent ``-``, the text quoted (``\\`` and ``"`` escaped)."""
    text = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{text}"'
