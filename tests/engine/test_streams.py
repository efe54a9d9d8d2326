"""Delivery of engine events to asyncio consumers: one callback per loop per step."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mlxctl.engine.events import FinishEvent, FinishReason, Timings, TokenEvent, Usage
from mlxctl.engine.streams import RequestStream, deliver_held, delivered_together


def _finish() -> FinishEvent:
    return FinishEvent(FinishReason.LENGTH, Usage(1, 2), Timings(0, 0, 0, 0, 0))


def _on_thread(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, name="engine")
    thread.start()
    return thread


@pytest.mark.asyncio
async def test_events_put_together_reach_each_loop_in_one_callback_in_order():
    loop = asyncio.get_running_loop()
    callbacks = []
    real = loop.call_soon_threadsafe
    loop.call_soon_threadsafe = lambda *a: (callbacks.append(threading.current_thread().name), real(*a))[1]
    first, second = RequestStream("a", lambda _: None, loop), RequestStream("b", lambda _: None, loop)
    seen_inside = []

    def engine_step():
        with delivered_together():
            first.put(TokenEvent("x", (1,)))
            second.put(TokenEvent("y", (2,)))
            first.put(TokenEvent("z", (3,)))
            first.put(_finish())
            second.put(_finish())
            seen_inside.append(len(callbacks))  # nothing has gone to the loop yet

    try:
        await loop.run_in_executor(None, _on_thread(engine_step).join)
        a, b = await first.collect_async(), await second.collect_async()
    finally:
        del loop.call_soon_threadsafe
    assert seen_inside == [0]
    assert callbacks.count("engine") == 1  # (the executor's own callback comes from its thread)
    assert (a.text, a.token_ids, b.text, b.token_ids) == ("xz", (1, 3), "y", (2,))


@pytest.mark.asyncio
async def test_outside_a_step_and_for_sync_streams_events_go_at_once():
    loop = asyncio.get_running_loop()
    eager = RequestStream("a", lambda _: None, loop)
    sync = RequestStream("s", lambda _: None)
    got_sync = []

    def engine_thread():
        eager.put(TokenEvent("x", (1,)))
        with delivered_together():
            sync.put(TokenEvent("q", (9,)))
            got_sync.append(sync._sync.qsize())
            sync.put(_finish())
        eager.put(_finish())

    await loop.run_in_executor(None, _on_thread(engine_thread).join)
    assert got_sync == [1]
    assert (await eager.collect_async()).text == "x"
    assert sync.collect().token_ids == (9,)


@pytest.mark.asyncio
async def test_a_step_that_raises_still_delivers_what_it_put():
    loop = asyncio.get_running_loop()
    stream = RequestStream("a", lambda _: None, loop)

    def failing_step():
        try:
            with delivered_together():
                stream.put(TokenEvent("x", (1,)))
                raise RuntimeError("step failed")
        except RuntimeError:
            stream.put(_finish())  # the engine's recovery finishes the request after the step

    await loop.run_in_executor(None, _on_thread(failing_step).join)
    got = await stream.collect_async()
    assert (got.text, got.finish_reason) == ("x", FinishReason.LENGTH)


@pytest.mark.asyncio
async def test_what_a_step_holds_so_far_can_be_handed_over_before_it_ends():
    """A step that runs several passes (chained speculative checks) hands each pass's tokens
    over as they come: ``deliver_held`` sends what is held now, in one callback, and the step's
    end sends only what came after."""
    loop = asyncio.get_running_loop()
    callbacks = []
    real = loop.call_soon_threadsafe
    loop.call_soon_threadsafe = lambda *a: (callbacks.append(threading.current_thread().name), real(*a))[1]
    stream = RequestStream("a", lambda _: None, loop)
    counted = []

    def engine_step():
        with delivered_together():
            stream.put(TokenEvent("x", (1,)))
            stream.put(TokenEvent("y", (2,)))
            deliver_held()
            counted.append(callbacks.count("engine"))
            deliver_held()  # nothing new held: no callback
            counted.append(callbacks.count("engine"))
            stream.put(TokenEvent("z", (3,)))
            stream.put(_finish())
        deliver_held()  # outside a step: nothing is held, nothing happens

    try:
        await loop.run_in_executor(None, _on_thread(engine_step).join)
        got = await stream.collect_async()
    finally:
        del loop.call_soon_threadsafe
    assert counted == [1, 1] and callbacks.count("engine") == 2
    assert (got.text, got.token_ids) == ("xyz", (1, 2, 3))
