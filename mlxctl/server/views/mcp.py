"""GET /v1/mcp/tools: the MCP servers of `serve --mcp-config` and the tools they offer."""

from __future__ import annotations

from aiohttp import web

from mlxctl.api.tool_loop import offered_tools
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS
from mlxctl.server.mcp_service import mcp_service


async def tools(request: web.Request) -> web.Response:
    """The allowed tools (OpenAI ``tools`` format, as the loop offers them) and each server's state."""
    service = mcp_service(request.app)
    if service is None:
        raise ApiError(404, "no MCP servers are configured: start mlxctl serve with --mcp-config FILE",
                       code="mcp_not_configured")
    hub = await service.ready()
    return web.json_response({
        "object": "list",
        "data": offered_tools(hub.tools()),
        "servers": hub.status(),
        "max_rounds": request.app[SETTINGS].mcp_max_rounds,
    })
