"""An embedding model: mlx-embeddings' network plus our tokenizer, pooling and cache.

The network comes from ``mlx_embeddings.utils.load_model`` (BERT, XLM-RoBERTa, ModernBERT,
Qwen3, Gemma 3 ... as that library supports them); we take its last hidden states and pool them
as the folder's sentence-transformers config says (``config.py``), rather than use its built-in
mean-and-normalise, so CLS or last-token models come out right too.

Inputs are sorted by length and run in batches bounded by a token budget (little padding);
each input's pooled vector is cached under its token ids (an LRU), so a repeated input costs
nothing. Normalisation happens after the cache, so both forms share it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlxctl.embed.cache import LRUCache
from mlxctl.embed.config import EmbedConfig, read_config
from mlxctl.embed.errors import InputTooLongError
from mlxctl.embed.tokens import TextTokens
from mlxctl.errors import BadInputError, ModelFormatError

MAX_BATCH = 32  # inputs per forward pass
TOKEN_BUDGET = 8192  # batch size x padded length per forward pass
CACHE_SIZE = 1024


@dataclass(frozen=True)
class Fitted:
    """Inputs ready to run: their ids and which of them were cut to the limit."""

    ids: list[list[int]]
    truncated: list[tuple[int, int]]  # (index, tokens before truncation)

    @property
    def tokens(self) -> int:
        return sum(len(i) for i in self.ids)


class Embedder:
    """One loaded embedding model. ``embed`` is safe to call from one thread at a time (a lock)."""

    def __init__(self, name: str, folder: Path, network, tokens: TextTokens, config: EmbedConfig,
                 cache_size: int = CACHE_SIZE):
        self.name, self.folder, self.network, self.tokens, self.config = name, Path(folder), network, tokens, config
        self.cache = LRUCache(cache_size)
        self._lock = threading.Lock()
        self.dimensions = int(self._run([self.tokens.encode(["a"])[0]]).shape[-1])  # also warms up

    @classmethod
    def load(cls, folder: Path, name: str | None = None, cache_size: int = CACHE_SIZE) -> Embedder:
        folder = Path(folder)
        config = read_config(folder)
        tokens = TextTokens(folder)
        network = _load_network(folder)
        return cls(name or folder.name, folder, network, tokens, config, cache_size)

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens

    # -- inputs -------------------------------------------------------------------------------

    def fit(self, ids: Sequence[Sequence[int]], *, truncate: bool, hint: str | None = None) -> Fitted:
        """Each input checked against the model's limit: cut to it with ``truncate``, else an
        :class:`InputTooLongError` naming the first input over it."""
        limit = self.max_tokens
        fitted, cut = [], []
        for index, seq in enumerate(ids):
            if len(seq) > limit:
                if not truncate:
                    raise InputTooLongError(index, len(seq), limit, self.name, hint=hint)
                cut.append((index, len(seq)))
                seq = self.tokens.truncate(seq, limit)
            fitted.append(list(seq))
        return Fitted(fitted, cut)

    def prepare(self, texts: Sequence[str], *, truncate: bool, hint: str | None = None) -> Fitted:
        """Texts tokenized and fitted; an empty text is refused (it has nothing to embed)."""
        for index, text in enumerate(texts):
            if not text.strip():
                raise BadInputError(f"input {index} is empty")
        return self.fit(self.tokens.encode(texts), truncate=truncate, hint=hint)

    # -- running ------------------------------------------------------------------------------

    def embed(self, ids: Sequence[Sequence[int]], normalize: bool | None = None) -> np.ndarray:
        """``(len(ids), dimensions)`` float32: pooled, and normalised when ``normalize`` (None:
        as the model's config says). ``ids`` must already fit (see :meth:`fit`)."""
        out = np.zeros((len(ids), self.dimensions), dtype=np.float32)
        todo: dict[tuple[int, ...], list[int]] = {}
        for row, seq in enumerate(ids):
            key = tuple(seq)
            if (hit := self.cache.get(key)) is not None:
                out[row] = hit
            else:
                todo.setdefault(key, []).append(row)
        if todo:
            keys = list(todo)
            vectors = self._run([list(k) for k in keys])
            for key, vector in zip(keys, vectors):
                self.cache.put(key, vector)
                out[todo[key]] = vector
        if self.config.normalize if normalize is None else normalize:
            out /= np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        """Pooled, unnormalised vectors of ``ids`` in their order, run in length-sorted batches."""
        import mlx.core as mx

        from mlxctl.embed.pooling import pool

        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        results: list[np.ndarray | None] = [None] * len(ids)
        with self._lock:
            for batch in _batches(order, ids):
                width = len(ids[batch[0]])
                tokens = np.full((len(batch), width), self.tokens.pad_id, dtype=np.int32)
                mask = np.zeros((len(batch), width), dtype=np.int32)
                for row, i in enumerate(batch):
                    tokens[row, : len(ids[i])] = ids[i]
                    mask[row, : len(ids[i])] = 1
                hidden = self._hidden(mx.array(tokens), mx.array(mask))
                pooled = np.array(pool(hidden, mx.array(mask), self.config.pooling), dtype=np.float32)
                for row, i in enumerate(batch):
                    results[i] = pooled[row]
        return np.stack(results) if results else np.zeros((0, 0), dtype=np.float32)

    def _hidden(self, tokens, mask):
        output = self.network(tokens, attention_mask=mask)
        hidden = getattr(output, "last_hidden_state", None)
        if hidden is None:
            raise ModelFormatError(f"{self.name}: the network returns no token states to pool")
        return hidden


def _batches(order: list[int], ids: list[list[int]]) -> list[list[int]]:
    """Indices (longest first) grouped so no batch passes MAX_BATCH or TOKEN_BUDGET, and no input
    is padded to more than twice its length (a short text never pays for a long one's width)."""
    batches: list[list[int]] = []
    for i in order:
        if batches:
            current = batches[-1]
            width = len(ids[current[0]])  # the longest in the batch
            if (len(current) < MAX_BATCH and (len(current) + 1) * width <= TOKEN_BUDGET
                    and 2 * len(ids[i]) >= width):
                current.append(i)
                continue
        batches.append([i])
    return batches


def _load_network(folder: Path):
    """mlx-embeddings' model for ``folder``; its failures become one-line format errors."""
    try:
        from mlx_embeddings.utils import load_model
    except ImportError as exc:
        raise ModelFormatError(
            f"cannot import mlx-embeddings: {exc}", hint="embeddings need: pip install mlx-embeddings"
        ) from exc
    try:
        return load_model(folder)
    except FileNotFoundError as exc:
        raise ModelFormatError(f"{folder} has no weights mlx-embeddings can read: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"mlx-embeddings cannot load {folder}: {exc}") from exc
