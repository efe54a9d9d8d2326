"""The real daemon fixtures of tests/server, for the TUI tests."""

from tests.server.conftest import base_url, engine, serve  # noqa: F401
