"""The app's MCP hub: started in the background once the model is loaded, closed at shutdown.

``serve --mcp-config FILE`` keeps one :class:`~mlxctl.mcp.McpHub` per app (:class:`McpService`).
Requests that opt in to the tool loop (:mod:`mlxctl.server.mcp_loop`) wait for its start; a hub that
could not start is a 503 naming why. See docs/mcp.md.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from mlxctl.errors import MlxctlError

log = logging.getLogger("mlxctl.server")


class McpService:
    """The app's MCP hub and its start, which runs in the background (servers may take a while)."""

    def __init__(self, config_path: str, audit_log: str | None = None):
        self.config_path = config_path
        self.audit_log = audit_log
        self.hub: Any = None  # mlxctl.mcp.McpHub once built
        self.error: str | None = None
        self.closed = False
        self._task: asyncio.Task | None = None

    @property
    def state(self) -> str:
        if self.closed:
            return "closed"
        if self.error is not None:
            return "failed"
        if self._task is None or not self._task.done():
            return "starting"
        return "ready"

    def begin(self) -> None:
        if self._task is None and not self.closed:
            self._task = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        from mlxctl.mcp import McpHub

        try:
            self.hub = McpHub(self.config_path, audit_log=self.audit_log)
            await self.hub.start()
        except MlxctlError as err:  # the config changed under us, or the mcp SDK is missing
            self.error = f"{err.message} ({err.hint})" if err.hint else err.message
        except Exception as exc:  # noqa: BLE001 - reported to requests and the log, never raised
            self.error = f"{type(exc).__name__}: {exc}"
        if self.error is not None:
            log.error("MCP: the hub could not start: %s", self.error)
            return
        names, failed = self.hub.tool_names(), sorted(self.hub.errors)  # the hub logs why each failed
        log.log(logging.WARNING if failed else logging.INFO, "MCP: %d tool(s) available: %s%s", len(names),
                ", ".join(names) or "none", f"; server(s) that failed: {', '.join(failed)}" if failed else "")

    async def ready(self) -> Any:
        """The started hub (waiting for its start if need be); 503 when it could not start."""
        from mlxctl.server.errors import ApiError

        self.begin()
        if self._task is not None:
            await asyncio.shield(self._task)
        if self.closed:
            raise ApiError(503, "the MCP hub is closed: the server is shutting down")
        if self.error is not None or self.hub is None:
            raise ApiError(503, f"the MCP hub is not available: {self.error or 'not started'}")
        return self.hub

    async def close(self) -> None:
        """Stop the start if it still runs and disconnect every server (stdio servers exit)."""
        if self.closed:
            return
        self.closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.hub is not None:
            await self.hub.close()


def mcp_service(app: web.Application) -> McpService | None:
    """The app's MCP service (created and started on first use); None without --mcp-config."""
    from mlxctl.server.keys import SETTINGS, STATE

    settings, state = app[SETTINGS], app[STATE]
    if not settings.mcp_config:
        return None
    if state.mcp is None:
        state.mcp = McpService(settings.mcp_config, settings.mcp_audit_log)
    state.mcp.begin()
    return state.mcp


def start_mcp(app: web.Application) -> None:
    """Connect to the MCP servers in the background (lifecycle: once the model is loaded)."""
    mcp_service(app)


async def close_mcp(app: web.Application) -> None:
    """Disconnect the MCP servers (lifecycle: after draining; also the app's on_cleanup)."""
    from mlxctl.server.keys import STATE

    service = app[STATE].mcp
    if service is not None:
        await service.close()
