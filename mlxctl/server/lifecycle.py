"""`mlxctl serve`'s life: listen, load the model meanwhile, run until a signal, drain, exit.

Draining (SIGTERM or Ctrl-C): new requests get 503 with Retry-After while the ones in flight
have ``drain_grace_s`` to finish; whatever still runs is then ended with a shutdown error, so
every open stream gets a terminal event, and the process exits 0. A second signal skips the
rest of the grace period.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable

from aiohttp import web

from mlxctl.errors import UnavailableError
from mlxctl.server.connections import CappedSite, runner_options
from mlxctl.server.interrupt import interrupt, shutdown_error
from mlxctl.server.keys import ENGINE, POOL, SETTINGS, STATE
from mlxctl.server.logs import configure as configure_logs
from mlxctl.server.mcp_service import close_mcp, start_mcp
from mlxctl.server.settings import ServeSettings

log = logging.getLogger("mlxctl.server")
SETTLE_S = 5.0  # after the streams are ended: how long their views get to write the last event


async def serve(app: web.Application, announce: Callable[[str], None],
                stop: asyncio.Event | None = None) -> None:
    """Serve ``app`` until SIGTERM/SIGINT (or ``stop`` is set, when given: no signal handlers
    then), loading its engine in the background."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=SETTLE_S,
                           **runner_options(app[SETTINGS]))
    await runner.setup()
    try:
        await listen(runner, app[SETTINGS])
        announce(listening_url(runner))
        await run_until_signal(app, stop)
    finally:
        await runner.cleanup()
        for task in list(app[STATE].background):
            task.cancel()
        await app[POOL].close()
        if app[ENGINE].model is not None:  # a load still going on dies with the process
            app[ENGINE].shutdown()


async def listen(runner: web.AppRunner, settings: ServeSettings) -> None:
    host, port = settings.host, settings.port
    try:
        await CappedSite(runner, host, port, settings.max_connections).start()
    except OSError as exc:
        raise UnavailableError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                               hint="pick another --port, or stop what is using it") from exc


async def run_until_signal(app: web.Application, stop: asyncio.Event | None = None) -> None:
    force = asyncio.Event()
    if stop is None:
        stop = asyncio.Event()
        install_signals(stop, force)
    await until_loaded_or(stop, start_engine(app[ENGINE]))
    if app[ENGINE].model is not None:
        app[POOL].started(app[SETTINGS].model_name)  # --no-pin-primary: resident from here
        start_warmup(app)
        start_mcp(app)  # --mcp-config: connect to the MCP servers in the background
    reaper = asyncio.ensure_future(app[POOL].reaper())  # idle pool models unload after their keep-alive
    app[STATE].background.add(reaper)
    reaper.add_done_callback(app[STATE].background.discard)
    await stop.wait()
    await drain(app, force)
    await close_mcp(app)


async def until_loaded_or(stop: asyncio.Event, load: asyncio.Future) -> None:
    """Wait for the model to load (raising its error) unless a stop signal comes first."""
    load.add_done_callback(lambda f: f.cancelled() or f.exception())  # a late failure is not "unretrieved"
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([load, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if load.done():
        load.result()
        log.info("model loaded: ready for requests")


def start_warmup(app: web.Application) -> None:
    """Prefill the --warm-prompts in the background; requests are served meanwhile."""
    from mlxctl.server.warm import WarmProgress, warm

    settings, state = app[SETTINGS], app[STATE]
    if not settings.warm_prompts:
        return
    state.warm = WarmProgress(total=len(settings.warm_prompts))
    task = asyncio.ensure_future(warm(app[ENGINE], list(settings.warm_prompts), settings.warm_prompts_concurrency,
                                      state.warm))
    state.background.add(task)
    task.add_done_callback(state.background.discard)


def start_engine(engine) -> asyncio.Future:
    """Load the model on a daemon thread (a signal during a long load need not wait for it)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def load() -> None:
        error = None
        try:
            engine.start()
        except BaseException as exc:  # noqa: BLE001 (reported through the future)
            error = exc
        if not loop.is_closed():
            loop.call_soon_threadsafe(_resolve, done, error)

    threading.Thread(target=load, name="mlxctl-load", daemon=True).start()
    return done


def _resolve(future: asyncio.Future, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(None)


def install_signals(stop: asyncio.Event, force: asyncio.Event) -> None:
    def on_signal() -> None:
        (force if stop.is_set() else stop).set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)


async def drain(app: web.Application, force: asyncio.Event | None = None) -> None:
    """Refuse new work, let in-flight requests finish, then end what is left."""
    state = app[STATE]
    state.draining = True
    await first_of(state.idle.wait(), (force or asyncio.Event()).wait(), timeout=app[SETTINGS].drain_grace_s)
    for stream in list(state.streams):
        interrupt(stream, shutdown_error())
    await first_of(state.idle.wait(), timeout=SETTLE_S)


async def first_of(*aws, timeout: float) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()


def listening_url(runner: web.AppRunner) -> str:
    host, port = runner.addresses[0][:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def run(app: web.Application, announce: Callable[[str], None]) -> None:
    """The blocking entry point for the CLI: request logs to stderr, serve until a signal."""
    configure_logs(app[SETTINGS].log_format)
    asyncio.run(serve(app, announce))


def run_with_view(app: web.Application, view: Callable[[str, str | None], None], log_file: str | None = None) -> None:
    """``serve --tui``: the server on a thread of its own, ``view(url, api_key)`` (the CLI gives
    ``mlxctl top``) on this one; its return drains the server (request logs go to ``log_file``,
    not over the view)."""
    if log_file:
        configure_logs(app[SETTINGS].log_format, stream=open(log_file, "a", encoding="utf-8"))  # noqa: SIM115
    loop, stop, errors = asyncio.new_event_loop(), None, []
    ready = threading.Event()

    def server() -> None:
        nonlocal stop
        asyncio.set_event_loop(loop)
        stop = asyncio.Event()
        try:
            loop.run_until_complete(serve(app, lambda url: ready.set(), stop))
        except BaseException as exc:  # noqa: BLE001 - shown after the view closes
            errors.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=server, name="mlxctl-serve", daemon=True)
    thread.start()
    ready.wait()
    if not errors:
        settings = app[SETTINGS]
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        view(f"http://{host}:{settings.port}", settings.api_key)
        loop.call_soon_threadsafe(stop.set)
    thread.join()
    if errors:
        raise errors[0]
