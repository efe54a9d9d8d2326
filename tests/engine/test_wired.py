"""The wired memory limit: decided for Metal only, applied once, restored at exit.

Linux has no Metal, so the Metal path runs against a fake device dict and a recording setter;
the real mx calls are only checked to do nothing here."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import mlx.core as mx
from mlx import nn

from mlxctl.engine.wired import (
    GiB,
    WiredLimit,
    backend,
    model_bytes,
    over_working_set,
    wired_limit_bytes,
)

METAL = {"device_name": "Apple M2 Max", "memory_size": 64 * GiB, "max_recommended_working_set_size": 48 * GiB}


class Recorder:
    """A fake ``mx.set_wired_limit``: records each call, returns the previous limit like MLX."""

    def __init__(self, current: int = 0) -> None:
        self.current, self.calls = current, []

    def __call__(self, limit: int) -> int:
        self.calls.append(limit)
        previous, self.current = self.current, limit
        return previous


def metal(setter: Recorder, device: dict | None = None) -> WiredLimit:
    return WiredLimit(setter=setter, info=lambda: device or METAL, backend=lambda: "metal", sync=lambda: None)


def test_metal_wires_what_is_needed_below_the_working_set():
    assert wired_limit_bytes(20 * GiB, METAL, "metal") == 20 * GiB
    assert over_working_set(20 * GiB, METAL, "metal") is None


def test_metal_caps_a_need_over_the_working_set_and_says_so():
    assert wired_limit_bytes(60 * GiB, METAL, "metal") == 48 * GiB
    assert over_working_set(60 * GiB, METAL, "metal") == (
        "the models and KV need 60.0 GiB, more than the recommended working set 48.0 GiB; wiring 48.0 GiB"
    )


def test_an_unknown_need_wires_the_working_set():
    assert wired_limit_bytes(0, METAL, "metal") == 48 * GiB
    assert wired_limit_bytes(-1, METAL, "metal") == 48 * GiB


def test_other_backends_or_no_working_set_decide_nothing():
    for name in ("cuda", "cpu"):
        assert wired_limit_bytes(20 * GiB, METAL, name) is None
        assert over_working_set(60 * GiB, METAL, name) is None
    assert wired_limit_bytes(20 * GiB, {"device_name": "Apple M1"}, "metal") is None


def test_apply_off_metal_never_calls_the_setter_nor_asks_the_device():
    setter = Recorder()

    def info() -> dict:
        raise AssertionError("device_info asked off Metal")

    for name in ("cuda", "cpu"):
        wired = WiredLimit(setter=setter, info=info, backend=lambda n=name: n, sync=lambda: None)
        assert wired.apply(20 * GiB) is None
        wired.restore()
    assert setter.calls == []


def test_apply_then_restore_puts_the_previous_limit_back(caplog):
    setter = Recorder(current=3 * GiB)
    with caplog.at_level(logging.INFO, logger="mlxctl.engine"), metal(setter) as wired:
        assert wired.apply(20 * GiB) == 20 * GiB
        assert wired.limit == 20 * GiB
    assert setter.calls == [20 * GiB, 3 * GiB]
    assert setter.current == 3 * GiB
    assert "wired memory limit 20.0 GiB" in caplog.text


def test_a_second_apply_keeps_the_original_previous_limit():
    setter = Recorder(current=1 * GiB)
    wired = metal(setter)
    wired.apply(10 * GiB)
    wired.apply(30 * GiB)  # a model loaded later
    wired.restore()
    assert setter.calls == [10 * GiB, 30 * GiB, 1 * GiB]


def test_restore_is_idempotent_and_synchronises_first():
    setter, order = Recorder(), []
    wired = WiredLimit(
        setter=lambda n: order.append(("set", n)) or setter(n),
        info=lambda: METAL, backend=lambda: "metal", sync=lambda: order.append(("sync",)),
    )
    wired.restore()  # nothing applied: nothing to do
    wired.apply(8 * GiB)
    wired.restore()
    wired.restore()
    assert order == [("set", 8 * GiB), ("sync",), ("set", 0)]
    assert wired.limit is None


def test_apply_warns_when_the_need_exceeds_the_working_set(caplog):
    setter = Recorder()
    with caplog.at_level(logging.WARNING, logger="mlxctl.engine"):
        assert metal(setter).apply(60 * GiB) == 48 * GiB
    assert "more than the recommended working set 48.0 GiB" in caplog.text
    assert setter.calls == [48 * GiB]


def test_backend_probes_metal_then_cuda_and_tolerates_missing_modules():
    yes, no = SimpleNamespace(is_available=lambda: True), SimpleNamespace(is_available=lambda: False)
    assert backend(SimpleNamespace(metal=yes, cuda=no)) == "metal"
    assert backend(SimpleNamespace(metal=no, cuda=yes)) == "cuda"
    assert backend(SimpleNamespace(metal=no)) == "cpu"  # a build without mx.cuda
    assert backend(SimpleNamespace(metal=SimpleNamespace(), cuda=no)) == "cpu"  # no is_available


def test_the_real_calls_on_this_machine_are_a_no_op():
    assert backend() != "metal"  # these tests run on Linux (CPU backend)
    with WiredLimit() as wired:
        assert wired.apply(20 * GiB) is None
    assert wired.limit is None


def test_model_bytes_counts_the_weights():
    layer = nn.Linear(4, 3)  # 4*3 weights + 3 biases, float32
    assert model_bytes(layer) == (12 + 3) * 4
    assert model_bytes({"a": mx.zeros((2, 2), dtype=mx.float16), "b": 7}) == 8
