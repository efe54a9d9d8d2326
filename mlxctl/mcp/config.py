"""MCP server configuration: the common ``{"mcpServers": {...}}`` file, strictly checked.

The shape is the one most MCP clients read::

    {"mcpServers": {
        "calc":   {"command": "python", "args": ["calc.py"], "env": {"K": "v"}},
        "search": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    }}

plus two keys of our own per server: ``allow`` (tool names or shell-style globs a model may call;
absent means every tool) and ``timeout`` (seconds one call may take, default 30). ``${VAR}`` and
``${VAR:-default}`` in string values are taken from the environment, so secrets need not live in
the file. Every problem is a :class:`~mlxctl.errors.BadInputError` whose one-line message names
the file and the key.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError

DEFAULT_CALL_TIMEOUT = 30.0

SERVER_KEYS = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "type", "allow", "timeout", "disabled"}
)
TOP_LEVEL_KEYS = frozenset({"mcpServers"})
# "type" values other clients write; all but SSE map onto our two transports.
_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class ServerConfig:
    """One configured MCP server: a command to spawn (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] | None = None  # None: every tool the server lists
    timeout: float = DEFAULT_CALL_TIMEOUT
    disabled: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def allows(self, tool: str) -> bool:
        """Whether the allow-list admits the server's tool ``tool`` (its own, unqualified name)."""
        if self.allow is None:
            return True
        return any(fnmatchcase(tool, pattern) for pattern in self.allow)


@dataclass(frozen=True)
class McpConfig:
    """Every configured server, in file order; ``path`` is where it was read from (if anywhere)."""

    servers: dict[str, ServerConfig]
    path: str | None = None

    @property
    def enabled(self) -> list[ServerConfig]:
        return [server for server in self.servers.values() if not server.disabled]


def load_config(path: str | os.PathLike[str]) -> McpConfig:
    """Read and check an MCP config file (JSON, or YAML when PyYAML is installed)."""
    where = str(path)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInputError(f"{where}: MCP config file not found") from None
    except IsADirectoryError:
        raise BadInputError(f"{where}: MCP config path is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: cannot read MCP config: {_one_line(exc)}") from None

    if file.suffix.lower() in (".yaml", ".yml"):
        data = _parse_yaml(text, where)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInputError(
                f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    return parse_config(data, where)


def parse_config(data: Any, where: str = "<mcp config>") -> McpConfig:
    """Check an already-parsed config object; ``where`` names it in error messages."""
    if not isinstance(data, dict):
        raise BadInputError(f"{where}: the top level must be an object with an 'mcpServers' key")
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise BadInputError(f"{where}: unknown key '{unknown[0]}' (expected 'mcpServers')")
    if "mcpServers" not in data:
        raise BadInputError(f"{where}: missing key 'mcpServers'")
    raw_servers = data["mcpServers"]
    if not isinstance(raw_servers, dict):
        raise BadInputError(f"{where}: mcpServers: must be an object mapping server names to settings")
    servers: dict[str, ServerConfig] = {}
    for name, raw in raw_servers.items():
        servers[name] = _parse_server(name, raw, where)
    return McpConfig(servers=servers, path=None if where == "<mcp config>" else where)


def _parse_server(name: Any, raw: Any, where: str) -> ServerConfig:
    key = f"mcpServers.{name}"
    _check_server_entry(name, raw, where, key)
    fields = _ServerFields(raw, where, key)
    kind = _transport_type(fields)
    command, url = _endpoint(fields, kind)
    _check_transport_keys(fields, command, url)
    allow = fields.strings("allow")
    timeout = _timeout(fields)
    disabled = _disabled(fields)
    return ServerConfig(
        name=name,
        command=command,
        args=fields.strings("args") or (),
        env=fields.mapping("env"),
        cwd=fields.string("cwd"),
        url=url,
        headers=fields.mapping("headers"),
        allow=allow,
        timeout=float(timeout),
        disabled=disabled,
    )


def _check_server_entry(name: Any, raw: Any, where: str, key: str) -> None:
    """The server's name is usable in tool names, and its settings are an object of known keys."""
    if not isinstance(name, str) or not _SERVER_NAME.match(name) or "__" in name:
        raise BadInputError(
            f"{where}: {key}: server names may use only letters, digits, '-' and '_' (and not '__')"
        )
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: {key}: must be an object")
    unknown = sorted(set(raw) - SERVER_KEYS)
    if unknown:
        raise BadInputError(
            f"{where}: {key}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(SERVER_KEYS))})"
        )


class _ServerFields:
    """One server's settings, read key by key; each error names the file and the key."""

    def __init__(self, raw: dict[str, Any], where: str, key: str):
        self.raw = raw
        self.where = where
        self.key = key

    def error(self, problem: str) -> BadInputError:
        return BadInputError(f"{self.where}: {self.key}: {problem}")

    def bad(self, sub: str, problem: str) -> BadInputError:
        return BadInputError(f"{self.where}: {self.key}.{sub}: {problem}")

    def string(self, sub: str) -> str | None:
        value = self.raw.get(sub)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.bad(sub, "must be a non-empty string")
        return _expand(value, lambda problem: self.bad(sub, problem))

    def strings(self, sub: str) -> tuple[str, ...] | None:
        value = self.raw.get(sub)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.bad(sub, "must be a list of strings")
        return tuple(
            _expand(item, lambda problem, i=i: self.bad(f"{sub}[{i}]", problem))
            for i, item in enumerate(value)
        )

    def mapping(self, sub: str) -> dict[str, str]:
        value = self.raw.get(sub)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.bad(sub, "must be an object of string values")
        return {k: _expand(v, lambda problem, k=k: self.bad(f"{sub}.{k}", problem)) for k, v in value.items()}


def _transport_type(fields: _ServerFields) -> str | None:
    """The optional ``type`` key, if it names a transport we speak."""
    kind = fields.raw.get("type")
    if kind is None:
        return None
    if kind in ("sse",):
        raise fields.bad(
            "type",
            "the legacy SSE transport is not supported; use streamable HTTP ('http')",
        )
    if kind not in _TYPES:
        raise fields.bad("type", f"must be one of {', '.join(sorted(set(_TYPES)))}")
    return kind


def _endpoint(fields: _ServerFields, kind: str | None) -> tuple[str | None, str | None]:
    """Exactly one of ``command`` (stdio) and ``url`` (streamable HTTP), agreeing with ``type``."""
    command = fields.string("command")
    url = fields.string("url")
    if command is None and url is None:
        raise fields.error("needs either 'command' (stdio) or 'url' (streamable HTTP)")
    if command is not None and url is not None:
        raise fields.error("has both 'command' and 'url'; give one")
    if kind is not None and _TYPES[kind] != ("stdio" if command is not None else "http"):
        raise fields.bad(
            "type",
            f"'{kind}' does not match the server's {'command' if command else 'url'}",
        )
    if url is not None and not url.lower().startswith(("http://", "https://")):
        raise fields.bad("url", "must start with http:// or https://")
    return command, url


def _check_transport_keys(fields: _ServerFields, command: str | None, url: str | None) -> None:
    """Keys that belong to the other transport are mistakes, not silently ignored."""
    stdio_only = [sub for sub in ("args", "env", "cwd") if sub in fields.raw and command is None]
    if stdio_only:
        raise fields.bad(stdio_only[0], "only applies to a server started with 'command'")
    if "headers" in fields.raw and url is None:
        raise fields.bad("headers", "only applies to a server reached by 'url'")


def _timeout(fields: _ServerFields) -> float | int:
    timeout = fields.raw.get("timeout", DEFAULT_CALL_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise fields.bad("timeout", "must be a positive number of seconds")
    return timeout


def _disabled(fields: _ServerFields) -> bool:
    disabled = fields.raw.get("disabled", False)
    if not isinstance(disabled, bool):
        raise fields.bad("disabled", "must be true or false")
    return disabled


def _expand(value: str, bad) -> str:
    """Replace ``${VAR}`` / ``${VAR:-default}`` from the environment; an unset VAR is an error."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = os.environ.get(name)
        if found is not None and (found or default is None):
            return found
        if default is not None:
            return default
        raise bad(f"environment variable {name} is not set (write ${{{name}:-default}} for a fallback)")

    return _ENV_REF.sub(substitute, value)


def _parse_yaml(text: str, where: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise BadInputError(
            f"{where}: YAML MCP configs need PyYAML (pip install pyyaml); or write the file as JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or _one_line(exc)
        raise BadInputError(f"{where}: invalid YAML{at}: {problem}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
