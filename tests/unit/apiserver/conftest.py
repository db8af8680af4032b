"""Fixtures of the test API server's own tests."""

from tests.apiserver.fixtures import api_server, api_server_factory

__all__ = ["api_server", "api_server_factory"]
