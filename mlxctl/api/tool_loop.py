"""The MCP tool loop's bookkeeping, whatever drives it (the server or ``mlxctl run``).

A chat request opts in with ``"mcp": true`` or a ``{"type": "mcp"}`` entry in ``tools`` (which may
narrow the tools with ``allowed_tools``). The hub's tools are then offered next to the client's
own, and each round is one generation: when the model calls MCP tools the hub runs them, the
assistant's calls and the ``tool`` results are appended to the conversation, and the model
generates again. The loop ends when a round calls no MCP tool, when it calls one of the client's
tools (those come back as ordinary ``tool_calls``), when a round would call MCP tools after
``mcp_max_rounds`` rounds of calls (those calls are not run; finish_reason "length" and
``mcp_note`` say so), or when the results grew the conversation past what the context holds with
the request's max_tokens (the round before is the answer; finish_reason "length" and ``mcp_note``
say so). A forced ``tool_choice`` applies to the first round only; later rounds use ``auto``. The
calls that ran are listed in the response's ``mcp_calls``. See docs/mcp.md.

:class:`ToolLoop` is shared by both drivers: :mod:`mlxctl.server.mcp_loop` (async) and
:mod:`mlxctl.cli.mcp_run` (``mlxctl run --mcp-config``, blocking).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.chat_round import RoundResult, assistant_turn
from mlxctl.api.toolcalls import ToolCall
from mlxctl.errors import BadInputError, ContextOverflowError
from mlxctl.mcp.hub import SEPARATOR

log = logging.getLogger("mlxctl.server")

MCP_TOOL_TYPE = "mcp"
MCP_TOOL_KEYS = frozenset({"type", "allowed_tools"})
DEFAULT_MAX_ROUNDS = 8


# ---- what a request asks for ---------------------------------------------------------------


def wants_mcp(body: Any) -> bool:
    """Whether a chat request opts in: ``"mcp": true`` or a ``{"type": "mcp"}`` tools entry."""
    return body.mcp is True or any(_is_mcp_tool(t) for t in body.tools or ())


def _is_mcp_tool(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == MCP_TOOL_TYPE


def split_tools(tools: list[Any] | None, mcp_flag: bool | None = None) -> tuple[list[Any], list[str] | None]:
    """The client's own tools, and the ``allowed_tools`` patterns of ``{"type": "mcp"}`` entries
    (None: every MCP tool)."""
    client: list[Any] = []
    patterns: list[str] | None = None
    for i, tool in enumerate(tools or ()):
        if not _is_mcp_tool(tool):
            client.append(tool)
            continue
        if mcp_flag is False:
            raise BadInputError(f'tools[{i}] is an MCP tool, but the request says "mcp": false')
        unknown = sorted(set(tool) - MCP_TOOL_KEYS)
        if unknown:
            raise BadInputError(f"tools[{i}].{unknown[0]}: unknown key (an MCP entry takes type and allowed_tools)")
        allowed = tool.get("allowed_tools")
        if allowed is None:
            continue
        if not isinstance(allowed, list) or not all(isinstance(p, str) and p for p in allowed):
            raise BadInputError(f"tools[{i}].allowed_tools must be a list of tool names or patterns")
        patterns = [*(patterns or []), *allowed]
    return client, patterns


def offered_tools(hub_tools: list[dict], patterns: list[str] | None = None) -> list[dict]:
    """The hub's tools a request may use, in OpenAI's shape; tools whose name or schema a chat
    request could not carry are left out (and logged)."""
    from mlxctl.api.chat_plan import openai_tools

    names = [t["function"]["name"] for t in hub_tools]
    for pattern in patterns or ():
        if not any(fnmatchcase(name, pattern) for name in names):
            raise BadInputError(f"allowed_tools: {pattern!r} matches no available MCP tool "
                                f"(available: {', '.join(names) or 'none'})")
    out = []
    for tool in hub_tools:
        name = tool["function"]["name"]
        if patterns is not None and not any(fnmatchcase(name, p) for p in patterns):
            continue
        try:
            out.extend(openai_tools([tool]))
        except BadInputError as err:
            log.warning("MCP tool %s is not offered to the model: %s", name, err.message)
    return out


def merged_tools(client: list[Any], mcp: list[dict]) -> list[Any]:
    from mlxctl.api.chat_plan import openai_tools

    check_no_clash({t["function"]["name"] for t in openai_tools(client)}, mcp)
    return [*client, *mcp]


# ---- the loop's bookkeeping -----------------------------------------------------------------


@dataclass
class McpCall:
    """One MCP call the loop ran."""

    id: str
    round: int
    name: str
    arguments: str  # the JSON text the model wrote
    result: Any  # mlxctl.mcp.ToolResult

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "round": self.round, "name": self.name, "server": self.result.server,
                "tool": self.result.tool, "arguments": self.arguments, "result": self.result.text,
                "is_error": self.result.is_error, "duration_s": self.result.duration_s}


class ToolLoop:
    """Rounds of one conversation: which calls to run, the messages they add, when to stop.

    Each round's answer comes in as a :class:`~mlxctl.api.chat_round.RoundResult` (whatever the
    protocol); :meth:`after` says which MCP calls to run (none: the loop is over), :meth:`ran`
    records their results and says whether to generate again. When the loop ends the round is
    left as the client should see it: MCP calls that were run or that will not be run are taken
    out of its ``calls`` (the client's own calls stay). ``added`` holds the messages the loop
    appended to the conversation, as chat-template messages (the assistant's calls, then one
    ``tool`` message per result); ``history`` every round so far.
    """

    def __init__(self, mcp_names: set[str], max_rounds: int = DEFAULT_MAX_ROUNDS, *,
                 servers: Any = (), client_names: Any = ()):
        self.added: list[dict] = []
        self.history: list[RoundResult] = []
        self.mcp_names = set(mcp_names)
        self.servers = set(servers)  # configured MCP server names: "<server>__..." calls go to the hub
        self.client_names = set(client_names)
        self.max_rounds = max(1, max_rounds)
        self.rounds = 0  # generations so far
        self.tool_rounds = 0  # of them, those whose MCP calls were run
        self.calls: list[McpCall] = []
        self.note: str | None = None

    def round_chat(self, first: ChatRequest, later: ChatRequest) -> ChatRequest:
        """The next round's chat: ``first`` (the client's, its tool_choice as asked) in the first
        round, then ``later`` (a forced tool_choice made "auto") with the loop's messages appended."""
        if self.rounds == 0:
            return first
        return dataclasses.replace(later, messages=[*later.messages, *self.added], prefill="")

    def after(self, result: RoundResult) -> list[ToolCall]:
        """A round's answer: the MCP calls to run now ([] when the loop is over)."""
        self.rounds += 1
        self.history.append(result)
        mcp, client = self._partition(result)
        if not mcp:
            return []
        cut = result.finish == "length"
        if cut or self.tool_rounds >= self.max_rounds:
            why = ("the answer reached max_tokens" if cut
                   else f"the MCP tool loop reached its limit of {self.max_rounds} round(s) of tool calls")
            called = ", ".join(c.name for c in mcp)
            self.note = f"stopped: {why}; the model's last MCP calls were not run ({called})"
            _keep_calls(result, client, "tool_calls" if client else "length")
            return []
        return mcp

    def ran(self, result: RoundResult, calls: list[ToolCall], results: list[Any]) -> bool:
        """Record the results of :meth:`after`'s calls; True to generate again."""
        self.tool_rounds += 1
        ran = [McpCall(c.id, self.rounds, c.name, c.arguments, r) for c, r in zip(calls, results, strict=True)]
        self.calls += ran
        result.ran = ran
        _, client = self._partition(result)
        if client:  # the client runs its own calls; the MCP calls of this turn are done
            _keep_calls(result, client, "tool_calls")
            return False
        self.added.append(assistant_turn(result, calls))
        self.added += [{"role": "tool", "tool_call_id": c.id, "content": r.text} for c, r in zip(calls, results)]
        _keep_calls(result, [], "stop")
        return True

    def outgrown(self, result: RoundResult | None, error: BaseException) -> bool:
        """Whether ``error``, refusing the next round, ends the loop rather than the request: the
        results of ``result``'s calls (the round before) grew the prompt past what the context
        holds with the request's max_tokens. ``result`` is then the answer, its MCP calls taken
        out, with finish "length" and the note saying why (the calls ran: mcp_calls)."""
        overflow = error if isinstance(error, ContextOverflowError) else error.__cause__
        if self.rounds == 0 or result is None or not isinstance(overflow, ContextOverflowError):
            return False
        called = ", ".join(c.name for c in result.ran)
        self.note = (f"stopped: the prompt of round {self.rounds + 1} no longer fits: {overflow.message}; "
                     f"the results of the model's last MCP calls ({called}) were not given to it")
        _keep_calls(result, [], "length")
        return True

    def extension(self) -> dict[str, Any]:
        """The response's extension fields: mcp_calls, mcp_rounds and (if it stopped early) mcp_note."""
        out: dict[str, Any] = {"mcp_calls": [c.as_json() for c in self.calls], "mcp_rounds": self.rounds}
        if self.note is not None:
            out["mcp_note"] = self.note
        return out

    def is_mcp(self, name: str) -> bool:
        """Offered MCP tools, and names of a configured server's tools that were not offered (denied
        or unknown: the hub answers them with an error the model can read); client tools win."""
        if name in self.mcp_names:
            return True
        server, sep, _ = name.partition(SEPARATOR)
        return bool(sep) and server in self.servers and name not in self.client_names

    def _partition(self, result: RoundResult) -> tuple[list[ToolCall], list[ToolCall]]:
        mcp = [c for c in result.calls if self.is_mcp(c.name)]
        return mcp, [c for c in result.calls if not self.is_mcp(c.name)]


def _keep_calls(result: RoundResult, client: list[ToolCall], finish: str) -> None:
    result.calls = client
    result.finish = finish


def check_no_clash(client_names: Any, offered: list[dict]) -> None:
    """A client tool may not have an MCP tool's name."""
    for tool in offered:
        if tool["function"]["name"] in set(client_names):
            raise BadInputError(f"the tool {tool['function']['name']!r} is given by the request and by an MCP server; "
                                "rename it")


def later_choice(choice: Any) -> Any:
    """An OpenAI / Responses tool_choice after the first round: a forced one becomes "auto"."""
    return choice if choice in (None, "none", "auto") else "auto"
