"""`mlxctl top`: a live view of a running daemon, polled from /v1/status and /metrics.

:class:`TopApp` is reusable (``TopApp(url=..., interval=...)``): it only needs a base URL. Its
widgets are built once and updated in place on each poll. While the daemon is down or
restarting it says so and keeps polling; keys: q quit, p pause, r reset.
"""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Sparkline, Static

from mlxctl.tui import fmt
from mlxctl.tui.client import Poll, StatusPoller
from mlxctl.tui.stats import Tracker, finished_requests, in_flight
from mlxctl.tui.top_models import MODEL_COLUMNS, model_rows, models_title

DISCONNECTED = "disconnected — retrying"
COLUMNS = (("id", "request"), ("state", "state"), ("prompt", "prompt done/total"),
           ("cached", "cached"), ("generated", "generated/max"), ("tps", "tok/s"))


class TopApp(App[None]):
    """Watch one daemon: header, scheduler table, models, throughput and TTFT plots, cache,
    memory."""

    TITLE = "mlxctl top"
    CSS = """
    Screen { layout: vertical; }
    #header { height: 1; padding: 0 1; background: $primary; color: $text; text-style: bold; }
    #conn { height: 1; padding: 0 1; background: $success-darken-2; color: $text; }
    #conn.-down { background: $error; }
    #conn.-paused { background: $warning-darken-2; }
    #requests { height: 1fr; min-height: 5; border: round $primary-lighten-1; }
    #models { height: auto; max-height: 8; border: round $primary-lighten-1; }
    #plots { height: 6; }
    .plot { width: 1fr; height: 6; border: round $secondary; padding: 0 1; }
    .plot Sparkline { height: 1fr; }
    #panels { height: 9; }
    .panel { width: 1fr; height: 9; border: round $accent; padding: 0 1; }
    .-stale #requests, .-stale #models, .-stale .plot, .-stale .panel { opacity: 60%; }
    """
    BINDINGS: ClassVar = [
        Binding("q", "quit", "Quit"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("r", "reset", "Reset"),
    ]

    def __init__(self, url: str, interval: float = 1.0, api_key: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.interval = max(0.05, float(interval))
        self.poller = StatusPoller(url, api_key=api_key, timeout=min(10.0, max(2.0, 2 * self.interval)))
        self.url = self.poller.url
        self.tracker = Tracker()
        self.last_poll: Poll | None = None  # the latest answer, good or bad
        self.last_ok: Poll | None = None  # the latest good one
        self.connected = False
        self.paused = False
        self._polling = False
        self._timer = None

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(Text(f"mlxctl top  {self.url}"), id="header")
        yield Static(Text(f"connecting to {self.url} …"), id="conn")
        table = DataTable(id="requests", cursor_type="none", zebra_stripes=True)
        yield table
        yield DataTable(id="models", cursor_type="none", zebra_stripes=True)
        with Horizontal(id="plots"):
            with Vertical(id="throughput", classes="plot"):
                yield Sparkline([], id="throughput-spark", summary_function=max)
            with Vertical(id="ttft", classes="plot"):
                yield Sparkline([], id="ttft-spark", summary_function=max)
        with Horizontal(id="panels"):
            yield Static(Text("-"), id="cache", classes="panel")
            yield Static(Text("-"), id="memory", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#requests", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.border_title = "Requests"
        models = self.query_one("#models", DataTable)
        for key, label in MODEL_COLUMNS:
            models.add_column(label, key=key)
        models.border_title = "Models"
        self.query_one("#throughput").border_title = "Output tok/s"
        self.query_one("#ttft").border_title = "TTFT ms (requests finished per poll)"
        self.query_one("#cache").border_title = "Prefix cache"
        self.query_one("#memory").border_title = "Memory"
        self._timer = self.set_interval(self.interval, self.refresh_now)
        self.call_later(self.refresh_now)

    async def on_unmount(self) -> None:
        await self.poller.aclose()

    # -- actions ----------------------------------------------------------------------------

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self._timer.pause()
        else:
            self.tracker.rebase()  # the paused time is not an interval to average over
            self._timer.resume()
            self.call_later(self.refresh_now)
        self._show_connection()

    def action_reset(self) -> None:
        """Clear the plots, peaks and rates; the next polls start afresh."""
        self.tracker.reset()
        self.query_one("#requests", DataTable).clear()
        self._show_plots()
        if self.last_ok is not None:
            self._show(self.last_ok)

    # -- polling ----------------------------------------------------------------------------

    async def refresh_now(self) -> None:
        """Poll once and update every widget (skipped while paused or while a poll runs)."""
        if self.paused or self._polling:
            return
        self._polling = True
        try:
            poll = await self.poller.poll()
        except Exception as exc:  # noqa: BLE001 - the view must outlive any surprise
            poll = Poll(at=time.monotonic(), error=f"{type(exc).__name__}: {exc}")
        finally:
            self._polling = False
        if self.paused:  # p was pressed while the answer was on its way
            return
        self.last_poll = poll
        self.connected = poll.ok
        self.tracker.update(poll)
        if poll.ok:
            self.last_ok = poll
        try:
            self.screen.set_class(not poll.ok, "-stale")
            self._show(poll)
        except (NoMatches, ScreenStackError):  # the app closed while the answer was on its way
            if self.is_running and not self._exit:
                raise

    # -- rendering (in place) ---------------------------------------------------------------

    def _show(self, poll: Poll) -> None:
        self._show_connection()
        if not poll.ok:
            self.query_one("#requests", DataTable).clear()
            if self.last_ok is not None:
                self._show_header(self.last_ok.status, self.last_ok.metrics, reachable=False)
            return
        status = poll.status
        self._show_header(status, poll.metrics)
        self._show_requests(status)
        self._show_models(status)
        self._show_plots()
        self.query_one("#cache", Static).update(cache_text(status))
        self.query_one("#memory", Static).update(memory_text(status))

    def _show_connection(self) -> None:
        conn = self.query_one("#conn", Static)
        poll = self.last_poll
        conn.set_class(self.paused, "-paused")
        conn.set_class(poll is not None and not poll.ok and not self.paused, "-down")
        if self.paused:
            conn.update(Text("paused — press p to resume"))
        elif poll is None:
            conn.update(Text(f"connecting to {self.url} …"))
        elif not poll.ok:
            seen = ""
            if self.last_ok is not None:
                seen = f" (last answer {fmt.duration(time.monotonic() - self.last_ok.at)} ago)"
            conn.update(Text(f"{DISCONNECTED}: {poll.error}{seen}"))
        else:
            conn.update(Text(f"connected to {self.url} · every {self.interval:g}s · "
                             f"answer in {poll.latency_s * 1000:.0f} ms"))

    def _show_header(self, status: dict, metrics: dict[str, float], reachable: bool = True) -> None:
        engine = status.get("engine") or {}
        http = status.get("http") or {}
        if not reachable:
            state = Text("● unreachable", style="bold red")
        elif status.get("draining"):
            state = Text("● draining", style="bold yellow")
        elif status.get("loaded"):
            state = Text("● loaded", style="bold green")
        else:
            state = Text("● loading", style="bold yellow")
        header = Text.assemble(
            (str(status.get("model", "?")), "bold"), "  ", state,
            f"  up {fmt.duration(status.get('uptime_s'))}",
            f" │ http {max(0, http.get('in_flight', 1) - 1)}",  # less our own /v1/status
            f" │ batch {engine.get('batch_size', 0)}",
            f" │ steps {engine.get('steps', 0):,}",
            f" │ done {finished_requests(metrics):,}" if metrics else "",
        )
        self.query_one("#header", Static).update(header)

    def _show_requests(self, status: dict) -> None:
        table = self.query_one("#requests", DataTable)
        engine = status.get("engine") or {}
        requests = in_flight(status)
        wanted = {}
        for r in requests:
            rid = str(r.get("id"))
            tps = self.tracker.request_tps.get(rid)
            wanted[rid] = (
                rid[:18],
                str(r.get("status", "?")),
                f"{r.get('prompt_done', 0):,}/{r.get('prompt_tokens', 0):,}",
                f"{r.get('cached_tokens', 0):,}",
                f"{r.get('generated', 0):,}/{r.get('max_new_tokens') or '∞'}",
                f"{tps:.1f}" if tps is not None else "-",
            )
        update_rows(table, COLUMNS, wanted)
        table.border_title = (f"Requests: {len(engine.get('running') or [])} running · "
                              f"{len(engine.get('prefilling') or [])} prefilling · "
                              f"{len(engine.get('waiting') or [])} waiting")

    def _show_models(self, status: dict) -> None:
        """One row per served model (the primary first), updated in place; the last rows seen
        stay (dimmed) while the daemon does not answer."""
        update_rows(self.query_one("#models", DataTable), MODEL_COLUMNS, model_rows(status))
        self.query_one("#models", DataTable).border_title = models_title(status)

    def _show_plots(self) -> None:
        t = self.tracker
        for selector, points in (("#throughput-spark", t.throughput), ("#ttft-spark", t.ttft_ms)):
            spark = self.query_one(selector, Sparkline)
            spark.data = window(list(points), spark.content_size.width)
        prompt = f" · prompt {fmt.rate(t.prompt_tps, '')}" if t.prompt_tps is not None else ""
        self.query_one("#throughput").border_subtitle = (
            f"now {fmt.rate(t.output_tps, '')} · peak {fmt.rate(t.peak_output_tps, '')}{prompt}")
        mean = t.mean_ttft_ms(self.last_ok.metrics) if self.last_ok is not None else None
        self.query_one("#ttft").border_subtitle = (
            f"last {_ms(t.last_ttft_ms)} · all-time mean {_ms(mean)}")


def update_rows(table: DataTable, columns: tuple, wanted: dict[str, tuple]) -> None:
    """Make ``table`` hold exactly ``wanted`` (row key -> cells), changing cells in place."""
    for key in [k for k in table.rows if k.value not in wanted]:
        table.remove_row(key)
    present = {k.value for k in table.rows}
    for key, cells in wanted.items():
        if key in present:
            for (column, _), value in zip(columns, cells):
                table.update_cell(key, column, value, update_width=True)
        else:
            table.add_row(*cells, key=key)


def window(points: list[float], width: int) -> list[float]:
    """The last ``width`` points, zero-padded on the left: one column per poll, scaled from 0."""
    if width <= 0:
        return points or [0.0]
    return [0.0] * (width - len(points)) + points[-width:]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def cache_text(status: dict) -> Text:
    """The prefix cache's figures, and speculative decoding's when it is on."""
    prefix = (status.get("engine") or {}).get("prefix_cache") or {}
    if not prefix.get("enabled"):
        reason = prefix.get("reason")
        return Text("\n".join(["off" + (f": {reason}" if reason else ""), *speculation_lines(status)]))
    queries, hits = prefix.get("queries", 0), prefix.get("hits", 0)
    lines = [
        (f"blocks     {prefix.get('blocks', 0):,} ({prefix.get('referenced_blocks', 0):,} in use, "
         f"{prefix.get('block_size', '?')} tok each)"),
        *_checkpoint_lines(prefix),
        f"hit rate   {fmt.percent(hits, queries)} ({hits:,}/{queries:,} lookups)",
        f"hit tokens {prefix.get('hit_tokens', 0):,}",
        f"memory     {fmt.size(prefix.get('bytes', 0))} of {fmt.size(prefix.get('max_bytes'))}",
        (f"disk       {fmt.size(prefix.get('disk_bytes', 0))} in {prefix.get('disk_blocks', 0):,} blocks"
         if "disk_blocks" in prefix or "disk_bytes" in prefix else "disk       off"),
        (f"evictions  {prefix.get('evictions', 0):,}"
         + (f" (disk {prefix['disk_evictions']:,})" if "disk_evictions" in prefix else "")),
        *speculation_lines(status),
    ]
    return Text("\n".join(lines))


def speculation_lines(status: dict) -> list[str]:
    """``serve --speculative``: draft tokens accepted of those checked ([] when off)."""
    spec = (status.get("engine") or {}).get("speculative") or {}
    if spec.get("mode", "off") == "off":
        return []
    if not spec.get("active"):
        return [f"speculate  {spec['mode']}: off for this model (its caches cannot drop a draft)"]
    drafted, accepted = spec.get("draft_tokens", 0), spec.get("accepted_tokens", 0)
    return [f"speculate  {spec['mode']}: {accepted:,}/{drafted:,} draft tokens accepted "
            f"({fmt.percent(accepted, drafted)}) in {spec.get('steps', 0):,} drafts"]


def _checkpoint_lines(prefix: dict) -> list[str]:
    """A model served from checkpoints (sliding-window / recurrent layers): how many, their size."""
    if prefix.get("mode") != "checkpoints":
        return []
    return [f"checkpts   {prefix.get('checkpoints', 0):,} ({fmt.size(prefix.get('checkpoint_bytes', 0))}; "
            f"layers {', '.join(prefix.get('cache_layers') or ())})"]


def memory_text(status: dict) -> Text:
    mem = status.get("memory") or {}
    engine = status.get("engine") or {}
    if not mem:
        return Text("model not loaded yet")
    active, limit = mem.get("active_bytes", 0), mem.get("limit_bytes", 0)
    lines = [
        f"active {fmt.size(active):>10} {fmt.bar(active, limit, 16)} {fmt.percent(active, limit)}",
        f"peak   {fmt.size(mem.get('peak_bytes', 0)):>10}",
        f"cache  {fmt.size(mem.get('cache_bytes', 0)):>10}",
        f"KV     {fmt.size(engine.get('kv_bytes', 0)):>10} (running requests)",
        f"limit  {fmt.size(limit):>10}",
    ]
    budget = engine.get("memory")  # serve --memory-budget-gb: what the requests reserve of it
    if budget:
        reserved, room = budget.get("kv_reserved_bytes", 0), budget.get("kv_budget_bytes", 0)
        lines += [f"budget {fmt.size(budget.get('budget_bytes', 0)):>10} (KV {fmt.size(room)}, "
                  f"{fmt.size(budget.get('kv_queued_bytes', 0))} queued)",
                  f"KV res {fmt.size(reserved):>10} {fmt.bar(reserved, room, 16)} {fmt.percent(reserved, room)}"]
    return Text("\n".join(lines))
