"""How a model folder says its embeddings are made: pooling, normalisation, maximum length.

A sentence-transformers folder lists its modules in ``modules.json``: the Transformer, then a
``Pooling`` module (whose ``config.json`` picks the modes: mean, CLS, max, mean-sqrt-len,
weighted mean, last token; several modes are concatenated in that library's order) and
optionally ``Normalize`` (unit L2 length). ``sentence_bert_config.json`` holds
``max_seq_length``, the number of tokens (special tokens included) the model was trained on.

A folder without ``modules.json`` is treated as mlx-embeddings treats it: mean pooling and
normalisation. Modules we do not run (``Dense`` projections and the like) are refused rather than
skipped, since skipping them would give vectors that look fine and are wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlxctl.errors import ModelFormatError

# sentence-transformers' Pooling modes, in the order it concatenates them
POOLING_MODES = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
)
_ST = "sentence_transformers.models."
_KNOWN_MODULES = {"Transformer", "Pooling", "Normalize"}
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class EmbedConfig:
    pooling: tuple[str, ...]  # modes, concatenated in this order
    normalize: bool  # the model's own setting (a Normalize module)
    max_tokens: int  # special tokens included
    sentence_transformers: bool  # whether modules.json described the pipeline


def read_config(folder: Path) -> EmbedConfig:
    """The embedding recipe of the model in ``folder``."""
    folder = Path(folder)
    model_config = _json(folder / "config.json") or {}
    modules = _json(folder / "modules.json")
    max_tokens = _max_tokens(folder, model_config)
    if modules is None:
        return EmbedConfig(("mean",), True, max_tokens, False)
    if not isinstance(modules, list):
        raise ModelFormatError(f"{folder / 'modules.json'} is not a list of modules")
    pooling: tuple[str, ...] = ("mean",)
    normalize = False
    for module in modules:
        if not isinstance(module, dict):
            raise ModelFormatError(f"{folder / 'modules.json'} holds an entry that is not an object")
        kind = str(module.get("type", "")).removeprefix(_ST)
        if kind not in _KNOWN_MODULES:
            raise ModelFormatError(
                f"{folder.name}: sentence-transformers module {module.get('type')!r} is not supported",
                hint="mlxctl runs Transformer, Pooling and Normalize modules",
            )
        if kind == "Pooling":
            pooling = _pooling_modes(folder / str(module.get("path") or "") / "config.json")
        elif kind == "Normalize":
            normalize = True
    return EmbedConfig(pooling, normalize, max_tokens, True)


def _pooling_modes(path: Path) -> tuple[str, ...]:
    config = _json(path)
    if config is None:
        return ("mean",)  # sentence-transformers' own default
    modes = tuple(name for key, name in POOLING_MODES if config.get(key))
    if not modes and isinstance(config.get("pooling_mode"), str):  # the newer single-string form
        modes = (config["pooling_mode"].replace("_tokens", "").replace("_token", ""),)
    if not modes:
        raise ModelFormatError(f"{path} turns on no pooling mode")
    unknown = [m for m in modes if m not in {name for _, name in POOLING_MODES}]
    if unknown:
        raise ModelFormatError(f"{path}: pooling mode {unknown[0]!r} is not supported")
    return modes


def _max_tokens(folder: Path, model_config: dict) -> int:
    """sentence_bert_config's max_seq_length, else the tokenizer's, capped by the positions."""
    candidates = []
    st = _json(folder / "sentence_bert_config.json") or {}
    if isinstance(st.get("max_seq_length"), int):
        candidates.append(st["max_seq_length"])
    else:
        tok = _json(folder / "tokenizer_config.json") or {}
        limit = tok.get("model_max_length")
        if isinstance(limit, int) and 0 < limit < 1_000_000:  # transformers' "no limit" is ~1e30
            candidates.append(limit)
    positions = model_config.get("max_position_embeddings")
    if isinstance(positions, int) and positions > 0:
        candidates.append(positions)
    return min(candidates) if candidates else DEFAULT_MAX_TOKENS


def _json(path: Path) -> object | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"cannot read {path}: {exc}") from exc
