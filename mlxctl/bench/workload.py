"""Workload contract files (JSON or YAML): named cases and the checks on their replies.

    defaults: {max_tokens: 64, temperature: 0}
    cases:
      - name: capital
        messages: [{role: user, content: "What is the capital of France?"}]
        checks: {finish_reason: stop, require: ["(?i)paris"], forbid: [], min_chars: 3}
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mlxctl.bench.checks import Checks
from mlxctl.bench.spec import RequestSpec
from mlxctl.errors import BadInputError, MlxctlError, ModelNotFoundError

CASE_KEYS = {"name", "prompt", "messages", "max_tokens", "temperature", "ignore_eos", "checks"}
CHECK_KEYS = {"finish_reason", "require", "forbid", "min_chars"}


def load_workload(path: Path) -> tuple[RequestSpec, ...]:
    """The cases of a workload file; any mistake in it is a one-line error naming the case."""
    document = _read_document(path)
    if isinstance(document, list):
        document = {"cases": document}
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list) or not document["cases"]:
        raise BadInputError(f"{path}: expected a non-empty 'cases' list")
    _no_unknown(f"{path}", document, {"cases", "defaults", "description"})
    defaults = document.get("defaults") or {}
    cases = tuple(_case(path, index, {**defaults, **_mapping(path, index, raw)}) for index, raw in enumerate(document["cases"]))
    _unique_names(path, cases)
    return cases


def _read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelNotFoundError(f"workload file not found: {path}") from None
    except OSError as exc:
        raise BadInputError(f"cannot read workload {path}: {exc.strerror}") from None
    if path.suffix.lower() == ".json":
        return _parse_json(path, text)
    return _parse_yaml(path, text)


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{path}: not valid JSON: {exc}") from None


def _parse_yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise MlxctlError(f"{path}: reading YAML needs PyYAML", hint="pip install pyyaml, or write the workload as .json") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInputError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None


def _mapping(path: Path, index: int, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise BadInputError(f"{path}: case {index + 1} is not a mapping")
    return raw


def _case(path: Path, index: int, raw: dict[str, Any]) -> RequestSpec:
    name = str(raw.get("name") or f"case-{index + 1}")
    where = f"{path}: case {name!r}"
    _no_unknown(where, raw, CASE_KEYS)
    if ("prompt" in raw) == ("messages" in raw):
        raise BadInputError(f"{where}: give exactly one of 'prompt' or 'messages'")
    return RequestSpec(
        name=name,
        prompt=_text(where, raw["prompt"]) if "prompt" in raw else None,
        messages=_messages(where, raw["messages"]) if "messages" in raw else None,
        max_tokens=_number(where, raw, "max_tokens", int, 128),
        temperature=_number(where, raw, "temperature", float, 0.0),
        ignore_eos=bool(raw.get("ignore_eos", False)),
        checks=_checks(where, raw.get("checks") or {}),
    )


def _messages(where: str, raw: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(m, dict) and "role" in m for m in raw):
        raise BadInputError(f"{where}: 'messages' must be a list of {{role, content}} mappings")
    return tuple(raw)


def _checks(where: str, raw: Any) -> Checks:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: 'checks' must be a mapping")
    _no_unknown(f"{where} checks", raw, CHECK_KEYS)
    return Checks(
        finish_reason=tuple(str(r) for r in _listed(raw.get("finish_reason"))),
        require=_patterns(where, raw.get("require")),
        forbid=_patterns(where, raw.get("forbid")),
        min_chars=_number(where, raw, "min_chars", int, 0),
    )


def _patterns(where: str, raw: Any) -> tuple[re.Pattern[str], ...]:
    try:
        return tuple(re.compile(str(pattern)) for pattern in _listed(raw))
    except re.error as exc:
        raise BadInputError(f"{where}: bad regex {exc.pattern!r}: {exc}") from None


def _listed(raw: Any) -> list[Any]:
    return [] if raw is None else list(raw) if isinstance(raw, list) else [raw]


def _number(where: str, raw: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise BadInputError(f"{where}: '{key}' must be a non-negative number")
    return kind(value)


def _text(where: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise BadInputError(f"{where}: 'prompt' must be non-empty text")
    return raw


def _no_unknown(where: str, raw: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(raw) - known)
    if unknown:
        raise BadInputError(f"{where}: unknown key {unknown[0]!r}", hint=f"known keys: {', '.join(sorted(known))}")


def _unique_names(path: Path, cases: tuple[RequestSpec, ...]) -> None:
    names = [case.name for case in cases]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate:
        raise BadInputError(f"{path}: two cases are named {duplicate!r}")
