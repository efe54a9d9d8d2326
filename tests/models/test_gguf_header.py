import struct

import mlx.core as mx
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf import check_supported
from mlxctl.models.gguf_header import read_header
from tests.models.helpers import write_tiny_gguf

IQ2_XXS, IQ4_XS = 16, 23


def _set_tensor_type(path, tensor_name: str, ggml_type: int) -> None:
    """Patch the ggml type of one tensor in a GGUF header (data left as is)."""
    data = bytearray(path.read_bytes())
    encoded = tensor_name.encode()
    at = data.find(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded)
    (n_dims,) = struct.unpack_from("<I", data, at)
    struct.pack_into("<I", data, at + 4 + 8 * n_dims, ggml_type)
    path.write_bytes(bytes(data))


def test_reads_architecture_and_types(tiny_gguf):
    header = read_header(tiny_gguf[0])
    assert header.architecture == "llama"
    assert header.tensor_types["blk.0.attn_q.weight"] == "F32"
    assert len(header.tensor_types) == 2 * 9 + 2


def test_reads_f16_types(tmp_path):
    path, _, _ = write_tiny_gguf(tmp_path / "f16.gguf", dtype=mx.float16)
    types = read_header(path).tensor_types
    assert types["blk.1.ffn_down.weight"] == "F16"
    assert types["blk.1.ffn_norm.weight"] == "F32"


@pytest.mark.parametrize("ggml_type,name", [(IQ2_XXS, "IQ2_XXS"), (IQ4_XS, "IQ4_XS"), (99, "type 99")])
def test_unsupported_tensor_type_is_named(tiny_gguf, ggml_type, name):
    path = tiny_gguf[0]
    _set_tensor_type(path, "blk.1.ffn_down.weight", ggml_type)
    with pytest.raises(ModelFormatError) as caught:
        check_supported(path)
    assert f"tensor type {name} is not supported" in caught.value.message
    assert "blk.1.ffn_down.weight" in caught.value.message
    assert "Q4_K, Q5_K, Q6_K" in caught.value.hint  # the hint lists the types that are read


def test_unsupported_architecture_is_named(tmp_path):
    path = tmp_path / "phi.gguf"
    mx.save_gguf(
        str(path), {"token_embd.weight": mx.zeros((4, 4))}, {"general.architecture": "phi2"}
    )
    with pytest.raises(ModelFormatError, match="architecture 'phi2' is not supported") as caught:
        check_supported(path)
    assert "llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3" in caught.value.hint


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"PK\x03\x04 definitely not gguf")
    with pytest.raises(ModelFormatError, match="is not a GGUF file"):
        read_header(path)


def test_truncated_header(tiny_gguf):
    path = tiny_gguf[0]
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelFormatError, match="truncated"):
        read_header(path)
