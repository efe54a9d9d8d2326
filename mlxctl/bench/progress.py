"""bench-serve's progress on stderr: a bar of measured runs and of the requests of the one in
flight when stderr is a terminal, plain lines otherwise (or nothing, with --quiet)."""

from __future__ import annotations

from typing import Any, TextIO


class Bar:
    """Two bars (measured runs; requests of the current warm-up or run) and the per-run lines
    printed above them, drawn by rich on ``stream``."""

    def __init__(self, stream: TextIO, *, force_terminal: bool | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(file=stream, force_terminal=force_terminal, soft_wrap=True)
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=self.console, transient=True)
        self._runs: Any = None
        self._requests: Any = None

    def __enter__(self) -> Bar:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def plan(self, measured_runs: int) -> None:
        self._runs = self._progress.add_task("measured runs", total=measured_runs)

    def step(self, label: str, requests: int) -> None:
        """A warm-up or measured run starts: ``requests`` to send."""
        if self._requests is None:
            self._requests = self._progress.add_task(label, total=requests)
        else:
            self._progress.reset(self._requests, total=requests, description=label)

    def tick(self) -> None:
        """One request of the current run is done."""
        if self._requests is not None:
            self._progress.advance(self._requests)

    def run_done(self) -> None:
        if self._runs is not None:
            self._progress.advance(self._runs)

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)


class NoBar:
    """Stand-in when stderr is not a terminal: no bars (the per-run lines still go through
    the caller's message function)."""

    def plan(self, measured_runs: int) -> None:
        pass

    def step(self, label: str, requests: int) -> None:
        pass

    def tick(self) -> None:
        pass

    def run_done(self) -> None:
        pass
