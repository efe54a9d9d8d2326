"""The MCP tool loop of `serve --mcp-config`, over the real SmolLM2 and the calc test server (stdio).

SmolLM2 does not call tools on its own, so the tests force the first round's call with
``tool_choice`` (or force the exact output with a regex); the rounds after it answer freely.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import openai
import pytest

from mlxctl.api.chat_plan import ChatPlan
from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.chat_round import RoundResult
from mlxctl.api.tool_loop import ToolLoop, split_tools
from mlxctl.api.toolcalls import ToolCall
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError, ContextOverflowError
from mlxctl.server.errors import ApiError
from tests.cli.helpers import REPO, clean_env
from tests.mcp.helpers import calc_stdio
from tests.server.infra import MODEL

pytest.importorskip("mcp")

ADD = {"type": "function", "function": {"name": "calc__add"}}
QUESTION = [{"role": "user", "content": "What is 2 + 3? Use the calculator."}]


@pytest.fixture
def calc_config(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add", "boom"])}}))
    return path


@pytest.fixture
def mcp_server(serve, calc_config, tmp_path):
    """(base URL, audit log path) of a server with the calc MCP server configured."""
    audit = tmp_path / "audit.jsonl"
    return serve(mcp_config=str(calc_config), mcp_audit_log=str(audit)), audit


def no_hub_call_returned(names: list[str], finish: str, ended: tuple[str, ...], calling: str) -> None:
    """The server ran every call of the hub's tools: none of them comes back to the client. The
    free rounds after the forced one may still invent a tool the request never declared (SmolLM2
    once called one named "2 + 3" in the whole suite's run): such a call is the client's to see,
    as every server passes it on, and the finish reason then says so (``calling``)."""
    assert not [name for name in names if name.startswith("calc__")], names
    assert finish in ((calling,) if names else ended), (names, finish)


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", timeout=300)


def test_tools_endpoint_lists_the_allowed_tools(mcp_server):
    url, _ = mcp_server
    body = httpx.get(f"{url}/v1/mcp/tools", timeout=60).json()
    names = [t["function"]["name"] for t in body["data"]]
    assert "calc__add" in names and "calc__boom" in names
    assert "calc__crash" not in names  # not on the allow-list
    (server,) = body["servers"]
    assert server["name"] == "calc" and server["state"] == "connected"
    assert {t["name"]: t["allowed"] for t in server["tools"]}["calc__crash"] is False
    assert body["max_rounds"] == 8


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_forced_call_runs_on_the_mcp_server_and_the_model_answers(mcp_server):
    url, audit = mcp_server
    # The grammar ends the forced call by itself; max_tokens leaves room for the arguments the
    # model chooses (it may add keys the calc schema allows) under any BLAS's numerics.
    resp = client(url).chat.completions.create(model=MODEL, messages=QUESTION, tool_choice=ADD, max_tokens=160,
                                               extra_body={"mcp": True})
    calls = resp.model_extra["mcp_calls"]
    assert calls and calls[0]["name"] == "calc__add" and calls[0]["round"] == 1, resp
    first = calls[0]
    args = json.loads(first["arguments"])
    assert first["is_error"] is False, first
    assert first["result"] == str(args["a"] + args["b"])
    assert first["server"] == "calc" and first["tool"] == "add" and first["duration_s"] >= 0
    assert resp.model_extra["mcp_rounds"] >= 2  # the call, then the answer
    choice = resp.choices[0]
    no_hub_call_returned([c.function.name for c in choice.message.tool_calls or []], choice.finish_reason,
                         ("stop", "length"), "tool_calls")
    assert resp.usage.completion_tokens > 0
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert any(line["name"] == "calc__add" and line["is_error"] is False for line in lines)


def test_tools_entry_narrowing_must_match(mcp_server):
    url, _ = mcp_server
    with pytest.raises(openai.BadRequestError, match="matches no available MCP tool"):
        client(url).chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4,
                                            tools=[{"type": "mcp", "allowed_tools": ["calc__nope"]}])


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_denied_tool_is_an_error_result_and_the_round_limit_stops_the_loop(serve, calc_config, tmp_path):
    # The regex makes every round call calc__getenv, which the allow-list leaves out: the hub
    # answers with an error the model sees; with one round allowed, the second round's call is
    # not run and the response says so. (Opting in with a {"type": "mcp"} tools entry.)
    url = serve(mcp_config=str(calc_config), mcp_max_rounds=1)
    call = '<tool_call>\n{"name": "calc__getenv", "arguments": {"name": "HOME"}}\n</tool_call>'
    resp = client(url).chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=40, tools=[{"type": "mcp", "allowed_tools": ["calc__a*"]}],
        extra_body={"structured_outputs": {"regex": _regex_literal(call)}})
    (denied,) = resp.model_extra["mcp_calls"]
    assert denied["name"] == "calc__getenv" and denied["is_error"] is True
    assert "not allowed" in denied["result"]
    assert resp.choices[0].finish_reason == "length"
    assert "limit of 1 round" in resp.model_extra["mcp_note"] and "calc__getenv" in resp.model_extra["mcp_note"]
    assert not resp.choices[0].message.tool_calls


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_results_that_no_longer_fit_the_context_end_the_loop(mcp_server):
    # The first round's refusal of a huge max_tokens gives its prompt length; with max_tokens
    # exactly the room it leaves, round 1 runs (the regex ends its call), and round 2, whose
    # prompt the call and its result made longer, no longer fits: the loop ends, not the request.
    url, _ = mcp_server
    call = '<tool_call>\n{"name": "calc__add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    ask = dict(model=MODEL, messages=QUESTION, extra_body={"mcp": True, "structured_outputs": {"regex": _regex_literal(call)}})
    with pytest.raises(openai.BadRequestError) as info:  # the first round: an ordinary 400
        client(url).chat.completions.create(max_tokens=10**9, **ask)
    assert info.value.code == "context_length_exceeded" and info.value.param == "max_tokens"
    prompt = int(re.search(r"the prompt has (\d+) tokens", info.value.message)[1])
    resp = client(url).chat.completions.create(max_tokens=8192 - prompt, **ask)
    (ran,) = resp.model_extra["mcp_calls"]
    assert ran["name"] == "calc__add" and ran["result"] == "5"
    assert resp.model_extra["mcp_rounds"] == 1 and resp.choices[0].finish_reason == "length"
    note = resp.model_extra["mcp_note"]
    assert f"round 2 no longer fits: max_tokens is {8192 - prompt} but the prompt has" in note
    assert "(calc__add) were not given to it" in note and not resp.choices[0].message.tool_calls


@pytest.mark.slow  # waits for the 120 s request timeout
def test_request_timeout_aborts_a_tool_call(serve, tmp_path):
    # The regex forces a call of calc__hold, which never answers (nothing releases it; the server
    # allows 600 s a call); the request's 120 s limit ends the loop in the middle of the call, which
    # is cancelled (and audited): the only way the request can end before the client's 240 s.
    # The generation takes about 20 s on an idle 2-core machine; the margin is for busy ones.
    config, audit = tmp_path / "mcp.json", tmp_path / "audit.jsonl"
    config.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(timeout=600, allow=["hold"])}}))
    url = serve(mcp_config=str(config), mcp_audit_log=str(audit), request_timeout_s=120)
    call = '<tool_call>\n{"name": "calc__hold", "arguments": {}}\n</tool_call>'
    r = httpx.post(f"{url}/v1/chat/completions", timeout=240, json={
        "model": MODEL, "messages": QUESTION, "max_tokens": 40, "mcp": True,
        "structured_outputs": {"regex": _regex_literal(call)}})
    assert r.status_code == 504, r.text
    assert audit.exists(), "the generation itself took the whole 120 s: is the machine very busy?"
    (line,) = map(json.loads, audit.read_text().splitlines())
    assert line["name"] == "calc__hold" and line["is_error"] is True


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_client_tools_end_the_loop(mcp_server):
    url, _ = mcp_server
    remember = {"type": "function", "function": {"name": "remember", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}}}
    resp = client(url).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Remember the number 7."}], max_tokens=120,
        tools=[remember], tool_choice={"type": "function", "function": {"name": "remember"}},
        extra_body={"mcp": True})
    assert resp.choices[0].finish_reason == "tool_calls", resp
    assert resp.choices[0].message.tool_calls[0].function.name == "remember"
    assert resp.model_extra["mcp_calls"] == [] and resp.model_extra["mcp_rounds"] == 1


def test_several_choices_are_refused(mcp_server):
    url, _ = mcp_server
    r = httpx.post(f"{url}/v1/chat/completions", timeout=60,
                   json={"model": MODEL, "messages": QUESTION, "mcp": True, "n": 2})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"


def test_without_mcp_config(base_url):
    r = httpx.get(f"{base_url}/v1/mcp/tools")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "mcp_not_configured" and "--mcp-config" in r.json()["error"]["message"]
    for body in ({"mcp": True}, {"tools": [{"type": "mcp"}]}):
        r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": MODEL, "messages": QUESTION, **body})
        assert r.status_code == 400, r.text
        assert "--mcp-config" in r.json()["error"]["message"]


def test_serve_refuses_a_bad_config_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"calc": {"args": ["x"]}}}')
    result = subprocess.run([sys.executable, "-m", "mlxctl", "serve", "--mcp-config", str(bad), "--port", "1"],
                            check=False, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs either 'command'" in lines[0], result.stderr


# ---- the loop's bookkeeping, without a model ----------------------------------------------------


class _Result:
    def __init__(self, text: str, is_error: bool = False):
        self.text, self.is_error, self.server, self.tool, self.duration_s = text, is_error, "calc", "add", 0.0


def _round(*names: str, reason: str = "tool_calls") -> RoundResult:
    calls = [ToolCall(n, '{"a": 1}', f"call_{i}") for i, n in enumerate(names)]
    return RoundResult(None, None, calls, reason)


def _chat() -> ChatRequest:
    return ChatRequest(list(QUESTION), ChatPlan(), SamplingParams())


def test_tool_loop_rounds():
    loop = ToolLoop({"calc__add"}, max_rounds=2, servers={"calc"},
                    client_names={"calc__mine"})
    first_chat, later_chat = _chat(), _chat()
    assert loop.round_chat(first_chat, later_chat) is first_chat
    first = _round("calc__add", "calc__secret")  # an offered tool and a denied one: both to the hub
    calls = loop.after(first)
    assert [c.name for c in calls] == ["calc__add", "calc__secret"]
    assert loop.ran(first, calls, [_Result("2"), _Result("Error: not allowed", True)])
    assert [m["role"] for m in loop.added] == ["assistant", "tool", "tool"]
    assert loop.added[0]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    again = loop.round_chat(first_chat, later_chat)
    assert [m["role"] for m in again.messages] == ["user", "assistant", "tool", "tool"]
    assert again.messages[3]["content"] == "Error: not allowed" and len(later_chat.messages) == 1
    mixed = _round("calc__add", "calc__mine")  # a client tool: run the MCP call, then hand back
    calls = loop.after(mixed)
    assert not loop.ran(mixed, calls, [_Result("2")])
    assert [c.name for c in mixed.calls] == ["calc__mine"] and mixed.finish == "tool_calls"
    assert [c.name for c in mixed.ran] == ["calc__add"]
    over = _round("calc__add")  # two rounds of calls ran: no third
    assert loop.after(over) == [] and over.finish == "length" and not over.calls
    ext = loop.extension()
    assert len(ext["mcp_calls"]) == 3 and ext["mcp_rounds"] == 3 and "limit of 2" in ext["mcp_note"]


def test_tool_loop_stops_on_a_cut_answer_and_plain_text():
    loop = ToolLoop({"calc__add"})
    cut = _round("calc__add", reason="length")
    assert loop.after(cut) == [] and "max_tokens" in loop.note
    assert ToolLoop({"calc__add"}).after(_round(reason="stop")) == []


def test_tool_loop_ends_when_a_later_round_outgrows_the_context():
    overflow = ContextOverflowError("max_tokens is 90 but ...", prompt_tokens=8150, context_length=8192,
                                    max_tokens=90, param="max_tokens")
    loop = ToolLoop({"calc__add"})
    assert not loop.outgrown(None, overflow)  # the first round: the request fails
    first = _round("calc__add")
    assert loop.ran(first, loop.after(first), [_Result("2")])
    assert not loop.outgrown(first, BadInputError("the prompt is empty"))  # other refusals stay errors
    try:  # the server's driver sees the engine's refusal as the ApiError made from it
        raise ApiError.from_mlxctl(overflow) from overflow
    except ApiError as err:
        assert loop.outgrown(first, err)
    assert first.finish == "length" and not first.calls
    assert loop.note == ("stopped: the prompt of round 2 no longer fits: max_tokens is 90 but ...; "
                         "the results of the model's last MCP calls (calc__add) were not given to it")


def test_split_tools():
    fn = {"type": "function", "function": {"name": "f"}}
    assert split_tools([fn, {"type": "mcp"}]) == ([fn], None)
    assert split_tools([{"type": "mcp", "allowed_tools": ["calc__*"]}]) == ([], ["calc__*"])
    from mlxctl.errors import BadInputError

    with pytest.raises(BadInputError, match="unknown key"):
        split_tools([{"type": "mcp", "server_url": "x"}])
    with pytest.raises(BadInputError, match='"mcp": false'):
        split_tools([{"type": "mcp"}], mcp_flag=False)


def _regex_literal(text: str) -> str:
    """A regex matching exactly ``text``."""
    return "".join("\\n" if c == "\n" else "\\" + c if c in ".^$*+?{}[]\\|()" else c for c in text)
