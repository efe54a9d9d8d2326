"""The MCP tool loop behind each protocol's endpoint: how a request opts in, the round chats
(its tools with the MCP tools added), and the answer in the protocol's words, streamed or not.

- /v1/chat/completions: ``"mcp": true`` or ``{"type": "mcp"}`` tools; ``mcp_calls`` lists the
  calls that ran (the last chunk of a stream carries it).
- /v1/messages: ``mcp_servers`` entries naming configured servers (the MCP connector's opt-in)
  or ``"mcp": true``; the calls that ran are ``mcp_tool_use`` / ``mcp_tool_result`` blocks.
- /v1/responses: ``{"type": "mcp", "server_label": ...}`` tools; ``mcp_list_tools`` and
  ``mcp_call`` output items.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mlxctl.api.chat_plan import anthropic_tools, openai_tools, responses_tools
from mlxctl.api.tool_loop import check_no_clash, later_choice, merged_tools, split_tools
from mlxctl.server.errors import ApiError
from mlxctl.server.mcp_loop import ServerRounds, answer_with_mcp, mcp_tools
from mlxctl.server.served_model import model_formats, sampling_defaults


def _names(tools: list[dict]) -> set[str]:
    return {t["function"]["name"] for t in tools}


async def chat_with_mcp(request: web.Request, body: Any, tokenizer: Any, images: Any = (),
                        image_token: str | None = None) -> web.StreamResponse:
    """POST /v1/chat/completions with the MCP loop (one choice). The client's images (and video
    frames) go with every round: they stand in its messages, which every round's prompt starts
    with (so the prefix cache serves them after the first round)."""
    from mlxctl.api.openai_output import ChatOutput
    from mlxctl.api.openai_translate import chat_request
    from mlxctl.server.mcp_stream import stream_with_mcp
    from mlxctl.server.views.openai_stream import McpChatStream

    if body.n != 1:
        raise ApiError(400, "the MCP tool loop generates one choice: n must be 1", param="n")
    client_tools, patterns = split_tools(body.tools, body.mcp)
    mcp = await mcp_tools(request, "mcp")
    mcp.offer(patterns)
    tools = merged_tools(client_tools, mcp.offered)
    loop = mcp.loop(request, _names(openai_tools(client_tools)))
    formats = model_formats(request)

    def chat(choice: Any) -> Any:
        copy = body.model_copy(update={"tools": tools or None, "mcp": None, "tool_choice": choice})
        return chat_request(copy, formats, images=images, image_token=image_token, defaults=sampling_defaults(request))

    first, later = chat(body.tool_choice), chat(later_choice(body.tool_choice))
    rounds, output = ServerRounds(request, tokenizer, formats), ChatOutput(body.model, tokenizer, body.include_usage)
    if body.stream:
        return await stream_with_mcp(request, mcp, loop, first, later, rounds, McpChatStream(output))
    final = await answer_with_mcp(request, mcp, loop, first, later, rounds)
    choice = output.split_choice(0, final.split(), final.finish, final.logprobs)
    return web.json_response({**output.body([choice], rounds.usage()), **loop.extension()})


async def messages_with_mcp(request: web.Request, req: Any, tokenizer: Any, images: tuple,
                            image_token: str | None) -> web.StreamResponse:
    """POST /v1/messages with the MCP loop."""
    from mlxctl.api.anthropic_mcp import custom_tools, rounds_content, server_patterns
    from mlxctl.api.anthropic_translate import chat_request, message_body, new_message_id, stop_reason
    from mlxctl.server.mcp_stream import stream_with_mcp
    from mlxctl.server.views.anthropic import MessagesStream

    mcp = await mcp_tools(request, "mcp_servers" if req.mcp_servers else "mcp")
    mcp.offer(server_patterns(req.mcp_servers, mcp.hub.config.servers))
    client = _names(anthropic_tools(req.tools))
    check_no_clash(client, mcp.offered)
    tools = [*(req.tools or []), *custom_tools(mcp.offered)]
    loop, formats = mcp.loop(request, client), model_formats(request)

    def chat(choice: Any) -> Any:
        copy = req.model_copy(update={"tools": tools or None, "tool_choice": choice, "mcp_servers": None})
        return chat_request(copy, formats, image_token=image_token, defaults=sampling_defaults(request), images=images)

    forced = isinstance(req.tool_choice, dict) and req.tool_choice.get("type") in ("any", "tool")
    first, later = chat(req.tool_choice), chat({"type": "auto"} if forced else req.tool_choice)
    if first.prefill:
        raise ApiError(400, "the MCP tool loop does not continue a final assistant message (a prefill): end the "
                            "messages with a user turn", param=f"messages.{len(req.messages) - 1}")
    rounds = ServerRounds(request, tokenizer, formats)
    if req.stream:
        return await stream_with_mcp(request, mcp, loop, first, later, rounds, MessagesStream(req.model, 0, None))
    final = await answer_with_mcp(request, mcp, loop, first, later, rounds)
    stop = stop_reason(final.reason, final.stop_string, bool(final.calls))
    body = message_body(new_message_id(), req.model, final.split(), stop, rounds.usage())
    return web.json_response({**body, "content": rounds_content(loop.history), **loop.extension()})


async def responses_with_mcp(request: web.Request, req: Any, tokenizer: Any, messages: list) -> web.StreamResponse:
    """POST /v1/responses with the MCP loop; a stored response keeps the calls and their results."""
    from mlxctl.api.responses_mcp import function_tools, list_tools_items, mcp_entries, rounds_output
    from mlxctl.api.responses_objects import ResponseDraft
    from mlxctl.api.responses_translate import chat_request, outcome, usage_body, with_reply
    from mlxctl.server.mcp_stream import stream_with_mcp
    from mlxctl.server.views.responses import ResponsesStream, remember

    mcp = await mcp_tools(request, "tools")
    client_tools, patterns, labels = mcp_entries(req.tools, mcp.hub.config.servers)
    mcp.offer(patterns)
    client = _names(responses_tools(client_tools))
    check_no_clash(client, mcp.offered)
    tools = [*client_tools, *function_tools(mcp.offered)]
    loop, formats = mcp.loop(request, client), model_formats(request)

    def chat(choice: Any) -> Any:
        copy = req.model_copy(update={"tools": tools or None, "tool_choice": choice})
        return chat_request(copy, messages, formats, sampling_defaults(request))

    first, later = chat(req.tool_choice), chat(later_choice(req.tool_choice))
    rounds, draft = ServerRounds(request, tokenizer, formats), ResponseDraft(req)
    listed = list_tools_items(labels, mcp.offered)
    if req.stream:
        stream = ResponsesStream(draft, None, tokenizer)
        stream.listed = listed
        resp = await stream_with_mcp(request, mcp, loop, first, later, rounds, stream)
        if stream.body is not None:
            remember(request, draft, stream.body, with_reply([*messages, *loop.added], stream.result))
        return resp
    final = await answer_with_mcp(request, mcp, loop, first, later, rounds)
    status, incomplete = outcome(final.reason)
    body = {**draft.body(status, listed + rounds_output(draft, loop.history, status), usage_body(rounds.usage()),
                         incomplete), **loop.extension()}
    remember(request, draft, body, with_reply([*messages, *loop.added], final.split()))
    return web.json_response(body)
