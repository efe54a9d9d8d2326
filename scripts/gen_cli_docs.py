"""Generate mlxctl's shell completions and man page from its command tree.

    python scripts/gen_cli_docs.py           # write completions/ and man/
    python scripts/gen_cli_docs.py --check   # exit 1 listing stale files, write nothing

Run it after changing any command, option or help text; tests/cli fails while the files are
stale. The output is deterministic: no dates, no absolute paths.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's mlxctl, not an installed one

from cli_docs import bash, fish, manpage, zsh  # noqa: E402
from cli_docs.tree import Command, read_tree

from mlxctl import __version__
from mlxctl.cli.app import app
from mlxctl.errors import ExitStatus

ROOT = Path(__file__).resolve().parent.parent
PROG = "mlxctl"

OUTPUTS: dict[str, Callable[[Command], str]] = {
    "completions/mlxctl.bash": bash.render,
    "completions/_mlxctl": zsh.render,
    "completions/mlxctl.fish": fish.render,
    "man/mlxctl.1": lambda tree: manpage.render(tree, __version__, ExitStatus),
}


def generate() -> dict[str, str]:
    """Every output file's path (relative to the repository) and its text."""
    tree = read_tree(app, PROG)
    return {path: render(tree) for path, render in OUTPUTS.items()}


def stale(files: dict[str, str], root: Path) -> list[str]:
    """The paths whose file under ``root`` is missing or differs from ``files``."""
    return [path for path, text in files.items() if _read(root / path) != text]


def write(files: dict[str, str], root: Path) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list stale files, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="write under this folder")
    args = parser.parse_args(argv)
    files = generate()
    changed = stale(files, args.root)
    if args.check:
        for path in changed:
            print(f"stale: {path} (run: python scripts/gen_cli_docs.py)", file=sys.stderr)
        return 1 if changed else 0
    write(files, args.root)
    for path in changed:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
