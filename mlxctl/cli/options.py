"""Option and argument aliases shared by commands, so each flag means one thing everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.models.dummy import PRESETS as DUMMY_PRESETS

MODEL_HELP = "Model reference: catalog name, folder, .gguf file or Hugging Face repo id."
QUIET_HELP = "Print only the data: no messages or progress."

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)]
ModelOpt = Annotated[
    Optional[str], typer.Option("--model", "-m", metavar="MODEL", help=MODEL_HELP)
]
ModelArg = Annotated[str, typer.Argument(metavar="MODEL", help=MODEL_HELP, show_default=False)]
OutputPathOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", metavar="PATH", help="Where to write it.")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
HostOpt = Annotated[str, typer.Option("--host", metavar="HOST", help="Address to listen on.")]
PortOpt = Annotated[int, typer.Option("--port", "-p", metavar="PORT", help="Port to listen on.")]
UrlOpt = Annotated[str, typer.Option("--url", metavar="URL", help="Base URL of a running server.")]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"

LoadFormatOpt = Annotated[
    str,
    typer.Option(
        "--load-format",
        metavar="FORMAT",
        help="auto: real weights; dummy: random weights for an architecture preset "
        f"({', '.join(DUMMY_PRESETS)}) or a config.json given as --model.",
    ),
]

MoeTopKOpt = Annotated[
    Optional[int],
    typer.Option(
        "--moe-top-k",
        metavar="K",
        min=1,
        show_default=False,
        help="Mixture-of-experts models: route each token to K experts (fewer than trained: "
        "faster decode, some quality cost). No effect on dense models.",
    ),
]

TensorParallelOpt = Annotated[
    int,
    typer.Option(
        "--tensor-parallel",
        metavar="N",
        min=1,
        help="Split the model over N ranks started by mlx.launch (GPUs of one host over NCCL, Macs "
        "over ring or JACCL; docs/distributed.md). Rank 0 does the work of the command; the others follow it.",
    ),
]

SpeculativeOpt = Annotated[
    str,
    typer.Option(
        "--speculative",
        metavar="MODE",
        help="Speculative decoding: off; ngram (prompt lookup: draft tokens copied from where the "
        "last few tokens occurred before in the prompt or reply); or draft (a smaller model of the same "
        "vocabulary guesses them, --draft-model). Drafts are checked in one pass and the output is what "
        "it would be without. Runs while one request decodes, on models whose caches can drop a "
        "rejected draft (docs/speculative.md).",
    ),
]

NumDraftTokensOpt = Annotated[
    int,
    typer.Option(
        "--num-draft-tokens",
        metavar="N",
        help="With --speculative: most draft tokens checked per step (1 to 64).",
    ),
]

GrowDraftsOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--grow-drafts/--no-grow-drafts",
        help="With --speculative ngram: a draft taken whole doubles the request's next one, up to 4x "
        "--num-draft-tokens (on CUDA at most 31); a rejected token goes back to --num-draft-tokens. "
        "By default drafts grow while a request is alone in the batch; --grow-drafts: in batches too; "
        "--no-grow-drafts: never.",
        show_default=False,
    ),
]

DraftModelOpt = Annotated[
    Optional[str],
    typer.Option(
        "--draft-model",
        metavar="MODEL",
        show_default=False,
        help="With --speculative draft: the model that drafts (same vocabulary, much smaller or quantised).",
    ),
]

DraftDtypeOpt = Annotated[
    str,
    typer.Option(
        "--draft-dtype",
        metavar="DTYPE",
        help="With --speculative draft: the draft model's weights dtype (as --dtype; native keeps it quantised).",
    ),
]

SystemOpt = Annotated[
    Optional[str], typer.Option("--system", "-s", metavar="TEXT", show_default=False, help="System prompt.")
]
SeedOpt = Annotated[
    Optional[int], typer.Option("--seed", metavar="N", show_default=False, help="Seed for reproducible sampling.")
]
ServerKeyOpt = Annotated[
    Optional[str],
    typer.Option("--api-key", metavar="KEY", envvar="MLXCTL_API_KEY", show_default=False,
                 help="Bearer token for a server started with --api-key."),
]
