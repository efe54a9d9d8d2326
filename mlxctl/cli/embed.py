"""`mlxctl embed`: embedding vectors for texts, as JSON lines, one JSON document or a .npy file."""

from __future__ import annotations

import json as jsonlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.options import JsonOpt, QuietOpt
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

OUTPUT_SUFFIXES = (".npy", ".jsonl")

TextsArg = Annotated[
    Optional[list[str]],
    typer.Argument(metavar="TEXT", show_default=False,
                   help="Texts to embed, one per argument; when omitted or '-', each non-blank line of stdin."),
]
EmbedModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", "-m", metavar="MODEL", show_default=False,
                 help="Embedding model: catalog name, store name, folder or Hugging Face repo id "
                 "(default: minilm-l6, fetched into the store on first use)."),
]
EmbedOutputOpt = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", metavar="FILE", show_default=False,
                 help="Write to FILE instead of stdout: .npy (a float32 matrix, one row per text) or .jsonl."),
]
NormalizeOpt = Annotated[
    Optional[bool],
    typer.Option("--normalize/--no-normalize", show_default=False,
                 help="Scale vectors to unit length [default: as the model's config says]."),
]
TruncateOpt = Annotated[
    bool,
    typer.Option("--truncate", help="Cut texts longer than the model takes (each cut is reported); "
                 "without it they are an error."),
]


def embed(
    ctx: typer.Context,
    text: TextsArg = None,
    model: EmbedModelOpt = None,
    output: EmbedOutputOpt = None,
    normalize: NormalizeOpt = None,
    truncate: TruncateOpt = False,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Compute embedding vectors for TEXT.

    Prints one JSON line per text, {"index", "text", "embedding"}, or writes a .npy matrix or a
    .jsonl file with --output. A text longer than the model takes is an error naming it, unless
    --truncate.
    """
    from mlxctl.cli.blas import ensure_fast_blas

    ensure_fast_blas()  # before stdin is read: it may re-execute this process
    out = output_for(ctx, json=json, quiet=quiet)
    if output is not None:
        check_output_path(output)
    texts = read_texts(text, out)
    _execute(out, texts, model, output, normalize, truncate)


def check_output_path(path: Path) -> None:
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise BadInputError(f"cannot write embeddings to {path}", hint="use a .npy or .jsonl file name")
    parent = path.expanduser().parent
    if not parent.is_dir():
        raise BadInputError(f"cannot write {path}: folder {parent} does not exist")


def read_texts(args: list[str] | None, out: Output) -> list[str]:
    """The texts: each argument, or each non-blank line of stdin (for none or '-')."""
    if args and args != ["-"]:
        if "-" in args:
            raise BadInputError("'-' (stdin) cannot be mixed with TEXT arguments")
        for index, text in enumerate(args):
            if not text.strip():
                raise BadInputError(f"text {index} is empty")
        return list(args)
    if args == ["-"] or not out.stdin_is_tty:
        lines = out.read_stdin().splitlines()
        texts = [line for line in lines if line.strip()]
        if skipped := len(lines) - len(texts):
            out.message(f"skipped {skipped} blank line{'s' if skipped > 1 else ''} of stdin")
        if not texts:
            raise BadInputError("stdin holds no text to embed")
        return texts
    raise BadInputError("no text given", hint="pass texts as arguments or pipe lines on stdin")


def _execute(out: Output, texts: list[str], model: str | None, output: Path | None,
             normalize: bool | None, truncate: bool) -> None:
    from mlxctl.embed.model import Embedder
    from mlxctl.embed.resolve import resolve_embedding_model

    name, folder = resolve_embedding_model(model, progress=out.message)
    embedder = Embedder.load(folder, name)
    fitted = embedder.prepare(texts, truncate=truncate, hint="shorten it, or pass --truncate")
    for index, tokens in fitted.truncated:
        out.message(f"truncated input {index} from {tokens} to {embedder.max_tokens} tokens")
    vectors = embedder.embed(fitted.ids, normalize=normalize)
    normalized = embedder.config.normalize if normalize is None else normalize
    if output is not None:
        _write_file(out, output.expanduser(), texts, vectors, name)
    elif out.is_json:
        rows = [{"index": i, "text": t, "tokens": len(ids), "embedding": v.tolist()}
                for i, (t, ids, v) in enumerate(zip(texts, fitted.ids, vectors))]
        out.data({"model": name, "dimensions": embedder.dimensions, "normalized": normalized,
                  "data": rows, "usage": {"tokens": fitted.tokens}})
    else:
        for line in json_lines(texts, vectors):
            out.text(line)


def json_lines(texts: list[str], vectors) -> list[str]:
    return [jsonlib.dumps({"index": i, "text": t, "embedding": v.tolist()}, ensure_ascii=False) + "\n"
            for i, (t, v) in enumerate(zip(texts, vectors))]


def _write_file(out: Output, path: Path, texts: list[str], vectors, name: str) -> None:
    import numpy as np

    try:
        if path.suffix.lower() == ".npy":
            np.save(path, vectors.astype(np.float32))
        else:
            path.write_text("".join(json_lines(texts, vectors)), encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    rows, dims = vectors.shape
    if out.is_json:
        out.data({"model": name, "path": str(path), "rows": rows, "dimensions": dims})
    else:
        out.message(f"wrote {rows} embedding{'s' if rows != 1 else ''} of {dims} dimensions to {path}")
