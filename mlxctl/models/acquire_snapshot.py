"""Fetch a Hugging Face snapshot into the user's own HF cache, or find it there; hub errors
become mlxctl's (gated, missing, offline, unreachable)."""

from __future__ import annotations

from pathlib import Path

from mlxctl.errors import BadInputError, ModelNotFoundError, UnavailableError
from mlxctl.models.offline import env_flag, offline
from mlxctl.models.resolve import Progress, _say


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The complete snapshot of ``repo_id`` in the local HF cache, or None; never downloads."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    from mlxctl.models.hub import hf_cache_dir

    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=hf_cache_dir(), local_files_only=True
        )
    except HFValidationError:
        raise BadInputError(f"{repo_id!r} is not a valid Hugging Face repo id") from None
    except LocalEntryNotFoundError:  # IncompleteSnapshotError is one too
        return None
    return Path(folder)


def fetch_snapshot(
    repo_id: str,
    revision: str | None,
    patterns: list[str],
    progress: Progress,
    bars: bool,
) -> Path:
    from contextlib import nullcontext

    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import disable_progress_bars

    from mlxctl.models.hub import hf_cache_dir

    local_only = offline("HF_HUB_OFFLINE")
    at = f"@{revision}" if revision else ""
    if not local_only:
        _say(progress, f"fetching {repo_id}{at} into the Hugging Face cache (resumes if cut off)")
    try:
        with nullcontext() if bars else disable_progress_bars():
            folder = snapshot_download(
                repo_id,
                revision=revision,
                cache_dir=hf_cache_dir(),
                allow_patterns=patterns,
                local_files_only=local_only,
            )
    except GatedRepoError:
        raise UnavailableError(
            f"{repo_id} is gated: accept its terms on huggingface.co, then log in with "
            "`hf auth login` and retry"
        ) from None
    except RevisionNotFoundError:
        raise ModelNotFoundError(f"{repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise ModelNotFoundError(
            f"no Hugging Face repo {repo_id} (check the name; for a private repo log in with "
            "`hf auth login`)"
        ) from None
    except HFValidationError:
        raise BadInputError(f"{repo_id!r} is not a valid Hugging Face repo id") from None
    except LocalEntryNotFoundError:
        raise UnavailableError(_not_cached_message(repo_id + at, local_only)) from None
    except (HfHubHTTPError, OSError) as e:  # network errors arrive as OSError subclasses
        raise UnavailableError(
            f"cannot download {repo_id}{at}: {_first_line(e)}; run the command again to resume"
        ) from None
    return Path(folder)


def _not_cached_message(ref: str, local_only: bool) -> str:
    if local_only:
        var = "MLXCTL_OFFLINE" if env_flag("MLXCTL_OFFLINE") else "HF_HUB_OFFLINE"
        return (
            f"cannot download {ref}: {var} is set and it is not in the Hugging Face cache; "
            f"unset {var} to download it, or copy a cache that holds it into $HF_HOME"
        )
    return (
        f"cannot download {ref}: the Hugging Face Hub is unreachable and it is not in the "
        "Hugging Face cache; check the network (or proxy) and run the command again"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
