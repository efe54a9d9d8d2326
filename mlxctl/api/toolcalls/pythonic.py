"""Pythonic calls (Llama 3.2 / 4 pythonic templates, ToolACE, ...): ``[f(a=1, b="x"), g()]``.

The whole output must be one Python list of calls (optionally wrapped in Llama 4's
``<|python_start|>`` / ``<|python_end|>``), parsed with :mod:`ast`: every element a call of a
plain or dotted name with keyword arguments only, whose values are literals (``true``/``false``/
``null`` are read as JSON's). With tools given, every name must be one of them. Anything else,
including text after the list, makes the whole output content.

Streaming: an output that cannot start with ``[name(`` (after the wrapper) is content at once;
one that does is held until the list closes; a list of calls is then held to the end of the
output (which must be blank) and its calls are sent whole, each call's arguments in one
fragment.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any, ClassVar

from mlxctl.api.toolcalls.base import ToolParser

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
_ENDINGS = (PYTHON_END, "<|eom|>", "<|eot|>", "<|eom_id|>", "<|eot_id|>")
_HEAD = re.compile(r"\s*(?:<\|python_start\|>\s*)?\[\s*[A-Za-z_][\w.]*\s*\(")
_IDENT = re.compile(r"[A-Za-z_][\w.]*")
_JSON_NAMES = {"true": True, "false": False, "null": None}


class _NotACall(Exception):
    pass


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise _NotACall
            k = _literal(key)
            if not isinstance(k, str):
                k = str(k)
            out[k] = _literal(value)
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _NotACall from None
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    if isinstance(value, (complex, bytes)):
        raise _NotACall
    return value


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise _NotACall


def parse_call_list(text: str) -> list[tuple[str, dict]] | None:
    """The calls of ``[f(a=1), ...]``, or None when the text is not exactly such a list."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in strings warn, they do not fail
            tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls = []
    try:
        for element in tree.body.elts:
            if not isinstance(element, ast.Call) or element.args:
                return None
            name = _dotted(element.func)
            arguments = {}
            for keyword in element.keywords:
                if keyword.arg is None:
                    return None
                arguments[keyword.arg] = _literal(keyword.value)
            calls.append((name, arguments))
    except (_NotACall, RecursionError):
        return None
    return calls


def _could_start(text: str) -> bool:
    """Whether ``text`` may still grow into ``[name(`` (after whitespace and the wrapper)."""
    s = text.lstrip()
    if s.startswith(PYTHON_START):
        s = s[len(PYTHON_START) :].lstrip()
    elif PYTHON_START.startswith(s):
        return True
    if not s:
        return True
    if s[0] != "[":
        return False
    s = s[1:].lstrip()
    match = _IDENT.match(s)
    if not s or match is None:
        return not s
    s = s[match.end() :].lstrip()
    return not s or s[0] == "("


class PythonicParser(ToolParser):
    name: ClassVar[str] = "pythonic"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._state = "start"  # start | list | tail | plain
        self._list_end = 0  # where the list's text ends in the buffer (state tail)
        self._calls_found: list[tuple[str, dict]] = []
        self._brackets = _Brackets()

    def _process(self, final: bool) -> None:
        while True:
            buf = self._buf
            if self._state == "plain":
                self._emit_content(buf)
                self._buf = ""
                return
            if self._state == "start":
                if not buf.strip() and not final:
                    return
                if _HEAD.match(buf):
                    self._state = "list"
                elif not final and _could_start(buf):
                    return
                else:
                    self._state = "plain"
            elif self._state == "list":
                end = self._close_of_list(buf, final)
                if end is None:
                    if final:
                        self._state = "plain"
                        continue
                    return
                calls = parse_call_list(self._strip_wrapper(buf[:end]))
                if calls is None or not all(self._known(name) for name, _ in calls) or self._rejects_any(calls):
                    self._state = "plain"
                    continue
                self._calls_found, self._list_end = calls, end
                self._state = "tail"
            else:  # tail: the list is complete; only blank text (or an end token) may follow
                rest = buf[self._list_end :].strip()
                for ending in _ENDINGS:
                    if rest.startswith(ending):
                        rest = rest[len(ending) :].strip()
                        break
                if rest and not final and any(e.startswith(rest) for e in _ENDINGS):
                    return
                if rest:
                    self._state = "plain"
                    continue
                if not final:
                    return
                self._buf = ""
                for name, arguments in self._calls_found:
                    self._emit_call(name, arguments)
                return

    @staticmethod
    def _strip_wrapper(text: str) -> str:
        text = text.strip()
        return text.removeprefix(PYTHON_START)

    def _known(self, name: str) -> bool:
        return not self._functions or name in self._functions

    def _close_of_list(self, buf: str, final: bool) -> int | None:
        """Where the list that starts at the first ``[`` closes (just after its ``]``), or None.

        Brackets are counted outside Python string literals (single, triple-quoted, escaped);
        the scan resumes where it stopped, so a long list costs one pass.
        """
        scan = self._brackets
        if scan.pos == 0:
            scan.pos = buf.index("[")
        return scan.run(buf, final)


class _Brackets:
    """Incremental bracket matching over Python source, aware of string literals."""

    def __init__(self) -> None:
        self.pos = 0
        self.depth = 0
        self.quote = ""  # the open string's delimiter: ', ", \'\'\' or \"\"\"
        self.escape = False

    def run(self, text: str, final: bool) -> int | None:
        i, n = self.pos, len(text)
        while i < n:
            ch = text[i]
            if self.quote:
                if self.escape:
                    self.escape = False
                elif ch == "\\":
                    self.escape = True
                elif ch == self.quote[0]:
                    if len(self.quote) == 3:
                        if i + 3 > n and not final:
                            break  # cannot tell yet whether the string closes here
                        if text.startswith(self.quote, i):
                            self.quote = ""
                            i += 3
                            continue
                    else:
                        self.quote = ""
            elif ch in "'\"":
                if i + 3 > n and not final:
                    break  # may open a triple-quoted string
                self.quote = ch * 3 if text.startswith(ch * 3, i) else ch
                i += len(self.quote)
                continue
            elif ch in "([{":
                self.depth += 1
            elif ch in ")]}":
                self.depth -= 1
                if self.depth <= 0:
                    self.pos = i + 1
                    return i + 1
            i += 1
        self.pos = i
        return None
