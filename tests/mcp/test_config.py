"""The MCP config file: the common mcpServers shape, our allow/timeout keys, and every error."""

from __future__ import annotations

import json

import pytest

from mlxctl.errors import BadInputError
from mlxctl.mcp import DEFAULT_CALL_TIMEOUT, load_config


def write(tmp_path, data, name="mcp.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_reads_stdio_and_http_servers(tmp_path):
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "calc": {"command": "python", "args": ["calc.py"], "env": {"K": "v"}, "allow": ["add", "s*"]},
                "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Token": "t"}, "timeout": 2.5},
            }
        },
    )
    config = load_config(path)
    calc, web = config.servers["calc"], config.servers["web"]
    assert list(config.servers) == ["calc", "web"]
    assert config.path == str(path)
    assert (calc.transport, calc.command, calc.args, calc.env) == (
        "stdio",
        "python",
        ("calc.py",),
        {"K": "v"},
    )
    assert calc.allow == ("add", "s*") and calc.timeout == DEFAULT_CALL_TIMEOUT
    assert calc.allows("add") and calc.allows("slow") and not calc.allows("boom")
    assert (web.transport, web.url, web.headers, web.timeout) == (
        "http",
        "http://127.0.0.1:9/mcp",
        {"X-Token": "t"},
        2.5,
    )
    assert web.allow is None and web.allows("anything")


def test_type_key_and_disabled_servers(tmp_path):
    config = load_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "a": {"type": "stdio", "command": "x"},
                    "b": {"type": "http", "url": "https://example.invalid/mcp", "disabled": True},
                }
            },
        )
    )
    assert [s.name for s in config.enabled] == ["a"]


def test_env_references_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_TEST_TOKEN", "abc")
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    config = load_config(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "web": {
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {
                            "Authorization": "Bearer ${MCP_TEST_TOKEN}",
                            "X-Other": "${MCP_TEST_UNSET:-dflt}",
                        },
                    }
                }
            },
        )
    )
    assert config.servers["web"].headers == {"Authorization": "Bearer abc", "X-Other": "dflt"}


def test_yaml_config(tmp_path):
    pytest.importorskip("yaml")
    path = write(
        tmp_path,
        "mcpServers:\n  calc:\n    command: python\n    args: [calc.py]\n    allow: [add]\n    timeout: 5\n",
        name="mcp.yaml",
    )
    server = load_config(path).servers["calc"]
    assert (server.command, server.args, server.allow, server.timeout) == (
        "python",
        ("calc.py",),
        ("add",),
        5.0,
    )


def test_bad_yaml(tmp_path):
    pytest.importorskip("yaml")
    path = write(tmp_path, "mcpServers: [unclosed\n", name="mcp.yml")
    with pytest.raises(BadInputError, match=r"mcp\.yml: invalid YAML at line"):
        load_config(path)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(BadInputError) as err:
        load_config(path)
    assert str(path) in str(err.value) and "not found" in str(err.value)


def test_bad_json_names_the_place(tmp_path):
    path = write(tmp_path, '{"mcpServers": {"a": {"command": "x",}}}')
    with pytest.raises(BadInputError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: invalid JSON at line 1 column")
    assert "\n" not in message


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ([], "top level"),
        ({}, "'mcpServers'"),
        ({"mcpServers": {}, "extra": 1}, "'extra'"),
        ({"mcpServers": []}, "mcpServers"),
        ({"mcpServers": {"a": "python"}}, "mcpServers.a"),
        ({"mcpServers": {"a": {}}}, "mcpServers.a: needs either 'command'"),
        ({"mcpServers": {"a": {"args": ["x"]}}}, "mcpServers.a: needs either 'command'"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}, "mcpServers.a: has both"),
        ({"mcpServers": {"a": {"command": "x", "comand": "y"}}}, "mcpServers.a.comand: unknown key"),
        ({"mcpServers": {"a": {"command": ""}}}, "mcpServers.a.command"),
        ({"mcpServers": {"a": {"command": ["x"]}}}, "mcpServers.a.command"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}, "mcpServers.a.env"),
        ({"mcpServers": {"a": {"command": "x", "headers": {"K": "v"}}}}, "mcpServers.a.headers"),
        ({"mcpServers": {"a": {"url": "http://h/mcp", "args": ["x"]}}}, "mcpServers.a.args"),
        ({"mcpServers": {"a": {"url": "ftp://h/mcp"}}}, "mcpServers.a.url"),
        ({"mcpServers": {"a": {"command": "x", "allow": "add"}}}, "mcpServers.a.allow"),
        ({"mcpServers": {"a": {"command": "x", "timeout": 0}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"command": "x", "timeout": "5"}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"command": "x", "timeout": True}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}, "mcpServers.a.disabled"),
        ({"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}, "mcpServers.a.type"),
        ({"mcpServers": {"a": {"type": "http", "command": "x"}}}, "mcpServers.a.type"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "mcpServers.a b"),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "mcpServers.a__b"),
        ({"mcpServers": {"a": {"command": "${MCP_TEST_SURELY_UNSET}"}}}, "mcpServers.a.command"),
    ],
)
def test_config_errors_name_file_and_key(tmp_path, data, key):
    path = write(tmp_path, data)
    with pytest.raises(BadInputError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    assert key in message, message
    assert "\n" not in message
