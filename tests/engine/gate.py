"""StepGate: an EngineConfig.fault_hook that holds the engine thread before a step, on a signal."""

from __future__ import annotations

import threading
from typing import Callable


class StepGate:
    """Holds the engine before the first step at which ``hold()`` is true (read on the engine
    thread), until ``release()``; ``held`` is set once the engine waits there. While it is held
    nothing is scheduled and the inbox is not drained: what is submitted meanwhile stays there."""

    def __init__(self, hold: Callable[[], bool] = lambda: True):
        self.hold = hold
        self.held = threading.Event()
        self._go = threading.Event()

    def __call__(self, step: int) -> None:
        go = self._go  # the one this hold waits on, even if hold_next() replaces it meanwhile
        if not go.is_set() and self.hold():
            self.held.set()
            go.wait()

    def release(self) -> None:
        self._go.set()

    def hold_next(self, hold: Callable[[], bool]) -> None:
        """Let the engine go on, and hold it again before the first step at which ``hold()`` is true."""
        go, self._go = self._go, threading.Event()
        self.hold = hold
        self.held.clear()
        go.set()
