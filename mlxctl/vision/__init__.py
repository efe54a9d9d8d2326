"""Images and videos in chat: decoding and fetching them, and the vision tower that turns them into
features the text tower reads in place of its image placeholder tokens (see docs/vision.md).

- ``images``: bytes -> :class:`ImageInput` (decoded, size-checked, content-hashed)
- ``sources``: ``data:``, ``file://`` and ``http(s)://`` URLs -> bytes, with size and time limits
- ``fetch``: image and video references of a request -> loaded inputs
- ``sampling``: which frames of a video are seen (fps, max frames); ``video``: decoding them
  (PyAV) into images; ``video_cache``: decoded videos by content + sampling
- ``preprocess``: the model's image processor config -> pixel arrays
- ``adapter``: :class:`VisionAdapter`, the vision tower + projector of a LLaVA-layout model
"""

from __future__ import annotations

from typing import Any

from mlxctl.errors import BadInputError

NO_IMAGES = "this model does not accept images"


def vision_of(loaded: Any) -> Any:
    """The loaded model's VisionAdapter, or None for a text-only model."""
    return getattr(loaded, "vision", None)


def images_refused(loaded: Any) -> BadInputError:
    """The error for images sent to a model that cannot take them, saying why."""
    config = getattr(loaded, "config", None) or {}
    if "vision_config" in config:
        from mlxctl.vision.adapter import SUPPORTED_TYPES

        return BadInputError(f"{NO_IMAGES}: mlxctl cannot run the vision tower of {config.get('model_type')!r} "
                             f"models yet (supported: {', '.join(SUPPORTED_TYPES)}), so it answers text only")
    return BadInputError(f"{NO_IMAGES}: it is a text-only model")


def image_token(loaded: Any) -> str | None:
    """The placeholder text a prompt marks an image with, or None for a text-only model."""
    vision = vision_of(loaded)
    return None if vision is None else vision.image_token
