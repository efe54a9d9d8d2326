"""Sentence embeddings: ``mlxctl embed`` and the server's ``/v1/embeddings`` and ``/v1/rerank``.

- :mod:`.config` reads how a model pools and normalises (its sentence-transformers files);
- :mod:`.tokens` turns texts (or token ids) into the model's input ids, with its special tokens;
- :mod:`.model` runs the network through mlx-embeddings, in length-sorted batches, with an LRU
  cache of identical inputs;
- :mod:`.resolve` finds or fetches the model folder (catalog wheels go into the store);
- :mod:`.service` is the server's side: a thread of its own that gathers concurrent requests
  into one batch.

Nothing here imports MLX at module level except :mod:`.model` and :mod:`.pooling`.
"""

from __future__ import annotations

from mlxctl.embed.errors import InputTooLongError

__all__ = ["InputTooLongError"]
