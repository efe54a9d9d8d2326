"""Texts (or token ids) to the model's input ids.

Texts are tokenized without special tokens and then wrapped in the model's own (``[CLS] ...
[SEP]`` for BERT, read from the tokenizer itself), so token-id inputs get exactly the same
treatment and truncation can keep both ends: ``prefix + body[:room] + suffix``, as
sentence-transformers does. ``tokenizer.json`` is read with the ``tokenizers`` library (its
padding and truncation settings are turned off: batching pads, and truncation is never silent);
a folder without one falls back to transformers' ``AutoTokenizer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError, ModelFormatError

_PROBE = "a"


class TextTokens:
    """The tokenizer of one model folder."""

    def __init__(self, folder: Path):
        folder = Path(folder)
        self._fast: Any = None
        self._hf: Any = None
        if (folder / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            try:
                self._fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as exc:
                raise ModelFormatError(f"cannot read {folder / 'tokenizer.json'}: {exc}") from exc
            self._fast.no_padding()
            self._fast.no_truncation()
            self.vocab_size = self._fast.get_vocab_size(with_added_tokens=True)
        else:
            try:
                from transformers import AutoTokenizer

                self._hf = AutoTokenizer.from_pretrained(str(folder))
            except Exception as exc:
                raise ModelFormatError(f"cannot load the tokenizer in {folder}: {exc}") from exc
            self.vocab_size = len(self._hf)
        self.prefix, self.suffix = self._specials()
        self.pad_id = self._pad_id()

    def body(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        if not texts:
            return []
        if self._fast is not None:
            return [e.ids for e in self._fast.encode_batch(list(texts), add_special_tokens=False)]
        return [list(ids) for ids in self._hf(list(texts), add_special_tokens=False)["input_ids"]]

    def wrap(self, body: Sequence[int]) -> list[int]:
        """``body`` with the model's special tokens around it."""
        return [*self.prefix, *body, *self.suffix]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's full input ids (special tokens included), untruncated."""
        return [self.wrap(ids) for ids in self.body(texts)]

    def from_ids(self, inputs: Sequence[Sequence[int]]) -> list[list[int]]:
        """Token-id inputs checked against the vocabulary and wrapped in special tokens."""
        for index, ids in enumerate(inputs):
            for token in ids:
                if not 0 <= token < self.vocab_size:
                    raise BadInputError(
                        f"input {index} holds token id {token}, outside the vocabulary (0..{self.vocab_size - 1})"
                    )
        return [self.wrap(ids) for ids in inputs]

    def truncate(self, ids: Sequence[int], limit: int) -> list[int]:
        """The first ``limit`` tokens' worth of ``ids``, its special tokens kept at both ends."""
        if len(ids) <= limit:
            return list(ids)
        room = max(0, limit - len(self.prefix) - len(self.suffix))
        body = ids[len(self.prefix) : len(ids) - len(self.suffix)]
        return [*self.prefix, *body[:room], *self.suffix]

    def _specials(self) -> tuple[list[int], list[int]]:
        """The special tokens the tokenizer puts before and after a text."""
        if self._fast is not None:
            enc = self._fast.encode(_PROBE, add_special_tokens=True)
            ids, special = enc.ids, enc.special_tokens_mask
        else:
            ids = list(self._hf(_PROBE, add_special_tokens=True)["input_ids"])
            plain = set(self._hf(_PROBE, add_special_tokens=False)["input_ids"])
            special = [0 if i in plain else 1 for i in ids]
        body = [i for i, s in enumerate(special) if not s]
        if not body:
            return list(ids), []
        return list(ids[: body[0]]), list(ids[body[-1] + 1 :])

    def _pad_id(self) -> int:
        if self._fast is not None:
            for name in ("[PAD]", "<pad>", "<|endoftext|>"):
                if (found := self._fast.token_to_id(name)) is not None:
                    return found
            return 0
        return self._hf.pad_token_id if self._hf.pad_token_id is not None else 0
