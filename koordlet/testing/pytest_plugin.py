"""pytest fixtures for plugin tests: ``pytest_plugins = ["koordlet.testing.pytest_plugin"]`` in a conftest.

``harness`` is a fresh :func:`koordlet.testing.make_harness`; ``fake_clock`` a fresh clock;
``plugin_registry`` empties the in-process extension registry (``api.register_qos_ext_plugin``) around a
test, so a registration cannot leak into the next one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordlet import api
from koordlet.testing.clock import FakeClock
from koordlet.testing.harness import Harness, make_harness


@pytest.fixture
def harness() -> Harness:
    return make_harness()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def plugin_registry() -> Iterator[None]:
    """The extension registry as the test found it, emptied; what the test registered is removed after."""
    before = api.registered_ext_plugins()
    for name in before:
        api.unregister_qos_ext_plugin(name)
    try:
        yield
    finally:
        for name in api.registered_ext_plugins():
            api.unregister_qos_ext_plugin(name)
        for name, (spec, plugin) in before.items():
            api.register_qos_ext_plugin(name, spec, plugin)
