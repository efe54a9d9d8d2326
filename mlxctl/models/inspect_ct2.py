"""CTranslate2 ``model.bin``: its variable table (name, dtype, shape, size) and what it says."""

from __future__ import annotations

import struct
from math import prod
from pathlib import Path
from typing import BinaryIO

from mlxctl.errors import ModelFormatError
from mlxctl.models.inspect_facts import _Facts, _tally

_CT2_DTYPES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}


def _is_ct2(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return len(head) > 8 and b"Spec" in head[6:64]


def read_ct2_variables(path: Path) -> tuple[str, list[tuple[str, str, tuple[int, ...], int]]]:
    """(spec name, [(name, dtype, shape, bytes)]) of a CTranslate2 ``model.bin``."""
    try:
        with open(path, "rb") as f:
            _version, spec = _ct2_unpack(f, "<I")[0], _ct2_string(f)
            _revision, count = _ct2_unpack(f, "<II")
            variables = [_ct2_variable(f) for _ in range(count)]
    except (struct.error, UnicodeDecodeError) as e:
        raise ModelFormatError(f"{path} is not a CTranslate2 model ({e})") from None
    return spec, variables


def _ct2_variable(f: BinaryIO) -> tuple[str, str, tuple[int, ...], int]:
    """One entry of the variable table; its data is skipped."""
    name = _ct2_string(f)
    (rank,) = _ct2_unpack(f, "<B")
    shape = _ct2_unpack(f, f"<{rank}I")
    code, nbytes = _ct2_unpack(f, "<BI")
    f.seek(nbytes, 1)
    return name, _CT2_DTYPES.get(code, f"code {code}"), shape, nbytes


def _ct2_unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, f.read(size))


def _ct2_string(f: BinaryIO) -> str:
    (length,) = _ct2_unpack(f, "<H")
    return f.read(length).rstrip(b"\0").decode("utf-8")


def _ct2_facts(folder: Path, model_bin: Path, files: list[Path]) -> _Facts:
    spec, variables = read_ct2_variables(model_bin)
    weights = [v for v in variables if v[2] and not v[0].endswith("_scale")]
    types: dict[str, dict] = {}
    for _, dtype, shape, _ in weights:
        _tally(types, dtype, prod(shape))
    main = max(types, key=lambda t: types[t]["parameters"]) if types else None
    architecture = spec.removesuffix("Spec").lower() or None
    return _Facts(
        format="ctranslate2",
        files=files,
        architecture=architecture,
        model_type=architecture,
        parameters=sum(prod(shape) for _, _, shape, _ in weights),
        weights_bytes=sum(v[3] for v in variables),
        dtype=main,
        quantization={"method": "ctranslate2", "bits": 8} if main == "int8" else None,
        tensor_types=types,
        chat_template=None,
        decoder=False,
    )
