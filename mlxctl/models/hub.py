"""Models from the Hugging Face Hub, through huggingface_hub and the user's HF cache.

The cache is tried first (no network); a download follows unless HF_HUB_OFFLINE or
MLXCTL_OFFLINE is set. huggingface_hub is imported only when a repo id is resolved.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mlxctl.errors import ModelNotFoundError, UnavailableError
from mlxctl.models.offline import offline

Progress = Callable[[str], None] | None

ALLOW_PATTERNS = [
    "*.json",
    "model*.safetensors",
    "tokenizer.model",
    "*.tiktoken",
    "*.txt",
    "*.jinja",
]


def hub_snapshot(repo_id: str, *, revision: str | None = None, progress: Progress = None) -> Path:
    """The local folder of ``repo_id`` at ``revision``: from the HF cache, else downloaded."""
    if (cached := _cached_snapshot(repo_id, revision)) is not None:
        return cached
    if offline("HF_HUB_OFFLINE"):
        raise UnavailableError(
            f"cannot download {repo_id}: offline mode is on and it is not in the HF cache",
            hint=_hint(repo_id),
        )
    if progress is not None:
        progress(f"downloading {repo_id} from the Hugging Face Hub")
    return _download(repo_id, revision)


def hf_cache_dir() -> Path | None:
    """HF_HUB_CACHE, else HF_HOME/hub, read now (huggingface_hub reads them once, at import)."""
    if cache := os.environ.get("HF_HUB_CACHE"):
        return Path(cache).expanduser()
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    return None


def _cached_snapshot(repo_id: str, revision: str | None) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=hf_cache_dir(), local_files_only=True
        )
    except HFValidationError as e:
        raise ModelNotFoundError(f"{repo_id!r} is not a valid Hugging Face repo id: {e}") from None
    except LocalEntryNotFoundError:
        return None
    return Path(folder)


def _download(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=hf_cache_dir(), allow_patterns=ALLOW_PATTERNS
        )
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise ModelNotFoundError(f"no Hugging Face repo {repo_id}: {_first_line(e)}") from None
    except (HfHubHTTPError, OSError) as e:  # huggingface_hub reports network errors as OSError
        raise UnavailableError(
            f"cannot download {repo_id}: {_first_line(e)}", hint=_hint(repo_id)
        ) from None
    return Path(folder)


def _hint(repo_id: str) -> str:
    return (
        f"on a connected machine run `hf download {repo_id}` and copy the Hugging Face cache "
        "(HF_HOME) here, or pass a local model folder"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0].removeprefix("Got: ") if text else type(error).__name__
