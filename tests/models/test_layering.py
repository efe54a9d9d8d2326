"""Arrows point down: no layer of mlxctl imports a layer above it, nor the UI/HTTP stack below
the server (../DESIGN.md, "Principles" 2 and "Seams").

Read statically with ``ast``: every import in every file under mlxctl/ counts, those inside
functions and ``if TYPE_CHECKING`` blocks too, so a lazy import is no way to keep a rule
(test_import_hygiene.py checks what importing a module loads at run time)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import mlxctl

PACKAGE_DIR = Path(mlxctl.__file__).parent
UI_AND_HTTP = ("aiohttp", "typer", "textual", "rich")
ABOVE_THE_LIBRARY = ("mlxctl.server", "mlxctl.cli", "mlxctl.tui")
FORBIDDEN = {  # a layer (package) -> what no file in it may import
    "mlxctl.engine": ABOVE_THE_LIBRARY + UI_AND_HTTP,
    "mlxctl.api": ABOVE_THE_LIBRARY + UI_AND_HTTP,
    "mlxctl.models": ABOVE_THE_LIBRARY + UI_AND_HTTP,
    "mlxctl.parsers": UI_AND_HTTP,
    "mlxctl.constrained": UI_AND_HTTP,
    "mlxctl.server": ("mlxctl.cli", "mlxctl.tui"),
}
# Today's violations, the debt: (file, imported module) -> why it is not mended yet. Mend one,
# then delete its entry (test_allowlist_holds_only_live_debt fails until you do).
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    line: int
    module: str


def module_of(path: Path) -> tuple[str, bool]:
    """A file's dotted module name, and whether it is a package's ``__init__``."""
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` reads, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def dynamic_target(node: ast.Call) -> str | None:
    """``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0] if node.args else None
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
        return first.value if isinstance(first.value, str) else None
    return None


def imports_in(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every module a source names in an import, anywhere in it; ``from a import b`` gives both
    ``a`` and ``a.b`` (``b`` may be a submodule)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, module, is_package)
            found.append(Import(node.lineno, base))
            found += [Import(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and dynamic_target(node):
            found.append(Import(node.lineno, dynamic_target(node)))
    return found


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def broken_rule(module: str, imported: str) -> str | None:
    """The forbidden prefix ``imported`` falls in for the layer of ``module``, if any."""
    for layer, forbidden in FORBIDDEN.items():
        if within(module, layer):
            return next((f for f in forbidden if within(imported, f)), None)
    return None


def violations_in(path: Path) -> list[tuple[str, int, str]]:
    """(file, line, imported module) for each forbidden import of one file, the most general
    name of a ``from`` import only (``a`` rather than ``a.b`` when ``a`` is already forbidden)."""
    module, is_package = module_of(path)
    name = path.relative_to(PACKAGE_DIR.parent).as_posix()
    found: list[tuple[str, int, str]] = []
    for imp in imports_in(path.read_text(encoding="utf-8"), module, is_package):
        seen = (v[2] for v in found if v[1] == imp.line)
        if broken_rule(module, imp.module) and not any(within(imp.module, s) for s in seen):
            found.append((name, imp.line, imp.module))
    return found


def all_violations() -> list[tuple[str, int, str]]:
    return [v for path in sorted(PACKAGE_DIR.rglob("*.py")) for v in violations_in(path)]


def listing(violations: list[tuple[str, int, str]]) -> str:
    return "\n".join(f"  {file}:{line} -> {module}" for file, line, module in violations)


def test_no_layer_imports_what_its_rules_forbid():
    new = [v for v in all_violations() if (v[0], v[2]) not in ALLOWED]
    assert not new, f"layering broken (file:line -> imported module); see FORBIDDEN:\n{listing(new)}"


def test_allowlist_holds_only_live_debt():
    live = {(file, module) for file, _, module in all_violations()}
    paid = sorted(set(ALLOWED) - live)
    assert not paid, f"these allowlisted imports are gone, delete their ALLOWED entries: {paid}"


def test_lazy_relative_and_dynamic_imports_are_all_seen():
    source = (
        "import os\n"
        "def f():\n"
        "    from ..server.app import init_app\n"
        "    from .. import cli\n"
        "    import importlib; importlib.import_module('rich.console')\n"
    )
    names = {(i.line, i.module) for i in imports_in(source, "mlxctl.engine.streams")}
    assert {(1, "os"), (3, "mlxctl.server.app"), (4, "mlxctl.cli"), (5, "rich.console")} <= names


def test_relative_imports_of_a_package_init_resolve_from_the_package_itself():
    names = {i.module for i in imports_in("from .kv import pool\n", "mlxctl.engine", is_package=True)}
    assert names == {"mlxctl.engine.kv", "mlxctl.engine.kv.pool"}


def test_rules_apply_by_layer():
    assert broken_rule("mlxctl.models.qualify", "mlxctl.tui.client") == "mlxctl.tui"
    assert broken_rule("mlxctl.parsers.hermes", "typer") == "typer"
    assert broken_rule("mlxctl.server.app", "aiohttp.web") is None
    assert broken_rule("mlxctl.server.app", "mlxctl.cli.output") == "mlxctl.cli"
    assert broken_rule("mlxctl.servers_of_mine", "mlxctl.cli") is None
