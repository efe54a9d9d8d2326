"""The daemon's GIL switch interval (server/gil.py): 0.5 ms while it serves, restored after;
``MLXCTL_SWITCH_INTERVAL_MS`` overrides it, and a bad value is refused in one line before a
model is looked for."""

from __future__ import annotations

import asyncio
import sys

import pytest

from mlxctl.errors import BadInputError, ExitStatus
from mlxctl.server.gil import ENV, serving_switch_interval, switch_interval_s
from tests.cli.helpers import run_cli


def test_the_default_is_half_a_millisecond():
    assert switch_interval_s({}) == pytest.approx(0.0005)
    assert switch_interval_s({ENV: " "}) == pytest.approx(0.0005)


@pytest.mark.parametrize(("value", "seconds"), [("2", 0.002), ("0.25", 0.00025), ("5", 0.005)])
def test_the_environment_overrides_it(value, seconds):
    assert switch_interval_s({ENV: value}) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "1001"])
def test_a_bad_value_is_refused_naming_the_variable(value):
    with pytest.raises(BadInputError, match=ENV):
        switch_interval_s({ENV: value})


def test_serving_sets_the_interval_and_restores_it():
    before = sys.getswitchinterval()
    with serving_switch_interval({ENV: "0.75"}) as seconds:
        assert seconds == pytest.approx(0.00075)
        assert sys.getswitchinterval() == pytest.approx(0.00075)
    assert sys.getswitchinterval() == pytest.approx(before)


def test_restored_when_the_server_fails():
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), serving_switch_interval({}):
        raise RuntimeError("listening failed")
    assert sys.getswitchinterval() == pytest.approx(before)


def test_the_daemon_serves_with_it_and_restores_it_after(monkeypatch):
    """``lifecycle.serve``, the daemon's own entry: listening on loopback (the interval read when
    it announces its URL), then the load of a model that is not there ends it."""
    from mlxctl.generation import lazy_engine
    from mlxctl.server.app import init_app
    from mlxctl.server.lifecycle import serve
    from mlxctl.server.settings import ServeSettings

    monkeypatch.setenv(ENV, "0.8")
    before = sys.getswitchinterval()
    app = init_app(lazy_engine("/no/such/model"), ServeSettings(model_name="none", port=0))
    seen = []
    with pytest.raises(Exception, match="no/such/model"):
        asyncio.run(serve(app, lambda url: seen.append((url, sys.getswitchinterval())), asyncio.Event()))
    assert seen and seen[0][0].startswith("http://127.0.0.1:")
    assert seen[0][1] == pytest.approx(0.0008)
    assert sys.getswitchinterval() == pytest.approx(before)


def test_the_cli_refuses_a_bad_value_in_one_line():
    result = run_cli("serve", "--model", "/no/such/model", env={ENV: "fast"})
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == [
        f"mlxctl: error: {ENV}='fast': give the GIL switch interval in milliseconds, above 0 and at most 1000",
        "hint: unset it for the default, 0.5 ms",
    ]
