"""Fake OpenAI-compatible servers on loopback, shared by the bench-serve tests of a module."""

from __future__ import annotations

import pytest

from tests.bench.fake_server import FakeServer, FakeSettings

FIRST_DELAY = 0.03
SLOW_FIRST_DELAY = 0.09


@pytest.fixture(scope="module")
def fake():
    with FakeServer(FakeSettings(first_delay=FIRST_DELAY)) as server:
        yield server


@pytest.fixture(scope="module")
def slow_fake():
    """Slower to the first token, refuses ignore_eos, and has no /metrics."""
    settings = FakeSettings(first_delay=SLOW_FIRST_DELAY, refuse_ignore_eos=True, metrics=False)
    with FakeServer(settings) as server:
        yield server
