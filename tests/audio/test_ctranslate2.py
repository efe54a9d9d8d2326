"""The CTranslate2 model.bin reader: layout, dtypes, aliases, int8/int16 scales, bad files."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mlxctl.audio.ctranslate2 import dequantized, read_model, write_model
from mlxctl.errors import ModelFormatError


def test_round_trip_keeps_names_shapes_dtypes_and_aliases(tmp_path):
    rng = np.random.default_rng(1)
    variables = {
        "a/weight": rng.standard_normal((3, 4)).astype(np.float32),
        "a/half": rng.standard_normal((5,)).astype(np.float16),
        "n": np.array(6, dtype=np.int16),
        "flag": np.array(1, dtype=np.int8),
        "big": np.array([1, -2, 70000], dtype=np.int32),
    }
    write_model(tmp_path / "model.bin", "WhisperSpec", variables, revision=3, aliases={"b/weight": "a/weight"})
    model = read_model(tmp_path)  # the folder works as well as the file
    assert (model.spec, model.revision, model.version) == ("WhisperSpec", 3, 6)
    for name, value in variables.items():
        assert model.variables[name].dtype == value.dtype
        np.testing.assert_array_equal(model.variables[name], value)
    assert model.aliases == {"b/weight": "a/weight"}
    assert model.variables["b/weight"] is model.variables["a/weight"]
    assert model.scalar("n") == 6 and model.scalar("missing", 7) == 7


def test_int8_rows_are_divided_by_their_scales(tmp_path):
    q = np.array([[127, -64], [10, 20]], dtype=np.int8)
    scale = np.array([127.0, 10.0], dtype=np.float32)
    write_model(tmp_path / "model.bin", "WhisperSpec", {"w": q, "w_scale": scale})
    v = read_model(tmp_path / "model.bin").variables
    np.testing.assert_allclose(dequantized(v, "w"), [[1.0, -64 / 127], [1.0, 2.0]])
    assert dequantized(v, "w_scale").dtype == np.float32  # floats pass through


def test_int16_with_one_scale(tmp_path):
    write_model(tmp_path / "model.bin", "S", {"w": np.array([[1024, -512]], dtype=np.int16),
                                               "w_scale": np.array(1024.0, dtype=np.float32)})
    np.testing.assert_allclose(dequantized(read_model(tmp_path).variables, "w"), [[1.0, -0.5]])


def test_quantized_without_scale_is_a_format_error(tmp_path):
    write_model(tmp_path / "model.bin", "S", {"w": np.ones((2, 2), dtype=np.int8)})
    with pytest.raises(ModelFormatError, match="w_scale"):
        dequantized(read_model(tmp_path).variables, "w")


def _header(version: int = 6) -> bytes:
    spec = b"WhisperSpec\0"
    return struct.pack("<I", version) + struct.pack("<H", len(spec)) + spec + struct.pack("<I", 3)


def _variable(name: str, shape: tuple[int, ...], code: int, data: bytes) -> bytes:
    raw = name.encode() + b"\0"
    return (struct.pack("<H", len(raw)) + raw + struct.pack("<B", len(shape)) + struct.pack(f"<{len(shape)}I", *shape)
            + struct.pack("<BI", code, len(data)) + data)


def test_bfloat16_is_widened_to_float32(tmp_path):
    values = np.array([1.5, -2.0, 0.15625], dtype=np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    (tmp_path / "model.bin").write_bytes(_header() + struct.pack("<I", 1) + _variable("x", (3,), 5, bf16)
                                         + struct.pack("<I", 0))
    got = read_model(tmp_path).variables["x"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize("content, message", [
    (b"", "cannot read"),
    (struct.pack("<I", 2) + b"\0" * 20, "binary version 2"),
    (_header() + struct.pack("<I", 1) + _variable("x", (4,), 0, b"\0" * 16)[:-4], "truncated"),
    (_header() + struct.pack("<I", 1) + _variable("x", (4,), 9, b"\0" * 16), "unknown dtype code 9"),
    (_header() + struct.pack("<I", 1) + _variable("x", (4,), 0, b"\0" * 12), "holds 12 bytes"),
])
def test_broken_files_are_format_errors(tmp_path, content, message):
    (tmp_path / "model.bin").write_bytes(content)
    with pytest.raises(ModelFormatError, match=message):
        read_model(tmp_path / "model.bin")


def test_missing_file(tmp_path):
    with pytest.raises(ModelFormatError, match="does not exist"):
        read_model(tmp_path / "model.bin")
