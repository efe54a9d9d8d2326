"""Image bytes -> a decoded, checked image keyed by its content.

Only raster formats Pillow decodes by itself are opened (PNG, JPEG, WebP, GIF, BMP, TIFF): never
formats that hand the file to an outside program (EPS runs Ghostscript). The pixel count is
checked from the header before anything is decoded, so a small file that claims a huge image
(a decompression bomb) is refused without the memory. The first frame of an animation is used.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.engine.kv.media import image_key
from mlxctl.errors import BadInputError

FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_PIXELS = 40_000_000  # about 6300 x 6300
MAX_KEPT_SIDE = 2048  # decoded images are kept at most this long a side (processors need far less)


class ImageError(BadInputError):
    """A bad image; ``param`` names the field (or flag) it came from."""

    def __init__(self, param: str, message: str, hint: str | None = None):
        super().__init__(f"{param}: {message}", hint)
        self.param = param


@dataclass(frozen=True)
class ImageLimits:
    max_bytes: int = MAX_IMAGE_BYTES
    max_pixels: int = MAX_IMAGE_PIXELS


@dataclass(frozen=True, eq=False)
class ImageInput:
    """One image of a request: its content key (engine/kv/media.py), the decoded RGB image
    (a PIL image) and the field it came from."""

    key: str
    image: Any
    where: str = "image"

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size


def decode_image(data: bytes, where: str, limits: ImageLimits = ImageLimits()) -> ImageInput:
    """Decode ``data``; an ImageError naming ``where`` if it is too big or not an image."""
    from PIL import Image

    if len(data) > limits.max_bytes:
        raise ImageError(where, f"the image is {len(data)} bytes, more than the {limits.max_bytes} allowed")
    if not data:
        raise ImageError(where, "the image is empty")
    try:
        with Image.open(io.BytesIO(data), formats=FORMATS) as img:
            width, height = img.size
            if width * height > limits.max_pixels:
                raise ImageError(where, f"the image is {width}x{height} pixels, more than the "
                                        f"{limits.max_pixels} allowed")
            img.seek(0)
            img.draft("RGB", (MAX_KEPT_SIDE, MAX_KEPT_SIDE))  # JPEG: decode at a reduced scale already
            rgb = to_rgb(img)
            if max(rgb.size) > MAX_KEPT_SIDE:  # a request holds up to 16: ~12 MB each, not ~120
                rgb.thumbnail((MAX_KEPT_SIDE, MAX_KEPT_SIDE), Image.Resampling.BICUBIC)
    except ImageError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError, EOFError) as exc:
        raise ImageError(where, f"not a decodable image ({', '.join(FORMATS)}): {exc}") from None
    return ImageInput(image_key(data), rgb, where)


def to_rgb(img: Any) -> Any:
    """RGB pixels; transparency goes onto white, as Hugging Face's image processors do."""
    from PIL import Image

    img.load()
    if img.mode == "RGB":
        return img.copy()
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")


def read_image_file(path: str | Path, where: str | None = None, limits: ImageLimits = ImageLimits()) -> ImageInput:
    """An image from a local file (``run --image``, ``file://`` URLs)."""
    path = Path(path).expanduser()
    where = where or str(path)
    return decode_image(read_limited(path, where, limits.max_bytes, "image"), where, limits)


def read_limited(path: Path, where: str, max_bytes: int, noun: str, error: type[ImageError] = ImageError) -> bytes:
    """A local file's bytes, or ``error`` naming ``where``: missing, not a file, unreadable or
    larger than ``max_bytes`` (checked before reading it). Every OS error (permission, a name too
    long, an I/O error, a file gone between the checks) is that error, never a crash (a 500)."""
    try:
        if not path.is_file():
            raise error(where, f"{path} is not a file" if path.exists() else f"no such file: {path}")
        size = path.stat().st_size
        if size > max_bytes:
            raise error(where, f"the {noun} is {size} bytes, more than the {max_bytes} allowed")
        return path.read_bytes()
    except PermissionError:
        raise error(where, f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise error(where, f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
