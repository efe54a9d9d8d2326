"""Every GGUF block type mlxctl reads, against llama.cpp's own dequantisation.

The reference decoders below are line-by-line transliterations of ``dequantize_row_*`` in
llama.cpp's ggml/src/ggml-quants.c (one block at a time, plain loops, nothing shared with
mlxctl). The blocks are random bytes, so every bit pattern of codes, scales and high bits occurs,
with their float16 fields set to finite values; tests/models/gguf_writer.py writes them to a file.
mlxctl reads the file and ``mx.dequantize`` gives the weights MLX will use.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_decode import REQUANT_BITS, load_tensor
from mlxctl.models.gguf_reader import read_gguf
from tests.models.gguf_writer import write_gguf

ROWS, COLS = 3, 512
# type -> (values per block, bytes per block, byte offsets of its float16 fields)
LAYOUTS = {
    "Q4_0": (32, 18, [0]),
    "Q4_1": (32, 20, [0, 2]),
    "Q5_0": (32, 22, [0]),
    "Q5_1": (32, 24, [0, 2]),
    "Q8_0": (32, 34, [0]),
    "Q2_K": (256, 84, [80, 82]),
    "Q3_K": (256, 110, [108]),
    "Q4_K": (256, 144, [0, 2]),
    "Q5_K": (256, 176, [0, 2]),
    "Q6_K": (256, 210, [208]),
}
EXACT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K"]
REQUANTISED = ["Q6_K", "Q3_K", "Q2_K"]
BITS = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q4_K": 4, "Q5_K": 5}


def f16(b: bytes, at: int) -> float:
    return float(np.frombuffer(b[at : at + 2], np.float16)[0])


def i8(v: int) -> int:
    return v - 256 if v > 127 else v


# -- llama.cpp's dequantize_row_* ------------------------------------------------------------


def ref_q4_0(b):
    d, qs = f16(b, 0), b[2:]
    y = [0.0] * 32
    for j in range(16):
        y[j], y[j + 16] = ((qs[j] & 0x0F) - 8) * d, ((qs[j] >> 4) - 8) * d
    return y


def ref_q4_1(b):
    d, m, qs = f16(b, 0), f16(b, 2), b[4:]
    y = [0.0] * 32
    for j in range(16):
        y[j], y[j + 16] = (qs[j] & 0x0F) * d + m, (qs[j] >> 4) * d + m
    return y


def ref_q5_0(b):
    d, qh, qs = f16(b, 0), int.from_bytes(b[2:6], "little"), b[6:]
    y = [0.0] * 32
    for j in range(16):
        xh_0 = ((qh >> (j + 0)) << 4) & 0x10
        xh_1 = (qh >> (j + 12)) & 0x10
        y[j] = (((qs[j] & 0x0F) | xh_0) - 16) * d
        y[j + 16] = (((qs[j] >> 4) | xh_1) - 16) * d
    return y


def ref_q5_1(b):
    d, m, qh, qs = f16(b, 0), f16(b, 2), int.from_bytes(b[4:8], "little"), b[8:]
    y = [0.0] * 32
    for j in range(16):
        xh_0 = ((qh >> (j + 0)) << 4) & 0x10
        xh_1 = (qh >> (j + 12)) & 0x10
        y[j] = ((qs[j] & 0x0F) | xh_0) * d + m
        y[j + 16] = ((qs[j] >> 4) | xh_1) * d + m
    return y


def ref_q8_0(b):
    d = f16(b, 0)
    return [i8(q) * d for q in b[2:34]]


def get_scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4)


def ref_q4_k(b):
    d, dmin, scales, q = f16(b, 0), f16(b, 2), b[4:16], b[16:144]
    y, is_, at = [], 0, 0
    for _ in range(0, 256, 64):
        sc, m = get_scale_min_k4(is_ + 0, scales)
        d1, m1 = d * sc, dmin * m
        sc, m = get_scale_min_k4(is_ + 1, scales)
        d2, m2 = d * sc, dmin * m
        y += [d1 * (q[at + l] & 0xF) - m1 for l in range(32)]
        y += [d2 * (q[at + l] >> 4) - m2 for l in range(32)]
        at += 32
        is_ += 2
    return y


def ref_q5_k(b):
    d, dmin, scales, qh, ql = f16(b, 0), f16(b, 2), b[4:16], b[16:48], b[48:176]
    y, is_, at, u1, u2 = [], 0, 0, 1, 2
    for _ in range(0, 256, 64):
        sc, m = get_scale_min_k4(is_ + 0, scales)
        d1, m1 = d * sc, dmin * m
        sc, m = get_scale_min_k4(is_ + 1, scales)
        d2, m2 = d * sc, dmin * m
        y += [d1 * ((ql[at + l] & 0xF) + (16 if qh[l] & u1 else 0)) - m1 for l in range(32)]
        y += [d2 * ((ql[at + l] >> 4) + (16 if qh[l] & u2 else 0)) - m2 for l in range(32)]
        at += 32
        is_ += 2
        u1 <<= 2
        u2 <<= 2
    return y


def ref_q6_k(b):
    d = f16(b, 208)
    y = [0.0] * 256
    ql, qh, sc, out = 0, 128, 192, 0
    for _ in range(0, 256, 128):
        for l in range(32):
            is_ = l // 16
            q1 = ((b[ql + l + 0] & 0xF) | (((b[qh + l] >> 0) & 3) << 4)) - 32
            q2 = ((b[ql + l + 32] & 0xF) | (((b[qh + l] >> 2) & 3) << 4)) - 32
            q3 = ((b[ql + l + 0] >> 4) | (((b[qh + l] >> 4) & 3) << 4)) - 32
            q4 = ((b[ql + l + 32] >> 4) | (((b[qh + l] >> 6) & 3) << 4)) - 32
            y[out + l + 0] = d * i8(b[sc + is_ + 0]) * q1
            y[out + l + 32] = d * i8(b[sc + is_ + 2]) * q2
            y[out + l + 64] = d * i8(b[sc + is_ + 4]) * q3
            y[out + l + 96] = d * i8(b[sc + is_ + 6]) * q4
        out += 128
        ql += 64
        qh += 32
        sc += 8
    return y


def _q3_k_scales(raw):
    kmask1, kmask2 = 0x03030303, 0x0F0F0F0F
    aux = [int.from_bytes(raw[i : i + 4], "little") for i in (0, 4, 8)] + [0]
    tmp = aux[2]
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
    return [i8(v) for v in b"".join(a.to_bytes(4, "little") for a in aux)]


def ref_q3_k(b):
    hm, qs, d_all = b[0:32], b[32:96], f16(b, 108)
    scales = _q3_k_scales(b[96:108])
    y, is_, m, at = [], 0, 1, 0
    for _ in range(0, 256, 128):
        shift = 0
        for _ in range(4):
            dl = d_all * (scales[is_] - 32)
            is_ += 1
            y += [dl * (((qs[at + l] >> shift) & 3) - (0 if hm[l] & m else 4)) for l in range(16)]
            dl = d_all * (scales[is_] - 32)
            is_ += 1
            y += [
                dl * (((qs[at + l + 16] >> shift) & 3) - (0 if hm[l + 16] & m else 4))
                for l in range(16)
            ]
            shift += 2
            m <<= 1
        at += 32
    return y


def ref_q2_k(b):
    scales, q, d, dmin = b[0:16], b[16:80], f16(b, 80), f16(b, 82)
    y, is_, at = [], 0, 0
    for _ in range(0, 256, 128):
        shift = 0
        for _ in range(4):
            sc = scales[is_]
            is_ += 1
            dl, ml = d * (sc & 0xF), dmin * (sc >> 4)
            y += [dl * ((q[at + l] >> shift) & 3) - ml for l in range(16)]
            sc = scales[is_]
            is_ += 1
            dl, ml = d * (sc & 0xF), dmin * (sc >> 4)
            y += [dl * ((q[at + l + 16] >> shift) & 3) - ml for l in range(16)]
            shift += 2
        at += 32
    return y


REFERENCE = {"Q4_0": ref_q4_0, "Q4_1": ref_q4_1, "Q5_0": ref_q5_0, "Q5_1": ref_q5_1,
             "Q8_0": ref_q8_0, "Q4_K": ref_q4_k, "Q5_K": ref_q5_k, "Q6_K": ref_q6_k,
             "Q3_K": ref_q3_k, "Q2_K": ref_q2_k}  # fmt: skip


# -- blocks, a file, and what mlxctl makes of it ---------------------------------------------


def random_blocks(kind: str, seed: int = 0) -> list[bytes]:
    """ROWS x COLS values of ``kind``: random bytes with finite float16 fields."""
    per_block, size, halves = LAYOUTS[kind]
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(ROWS * COLS // per_block):
        raw = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for at in halves:
            raw[at : at + 2] = np.float16(rng.uniform(-0.02, 0.02)).tobytes()
        blocks.append(bytes(raw))
    return blocks


def reference_values(kind: str, blocks: list[bytes]) -> np.ndarray:
    """llama.cpp's float32 values (its loops compute in float)."""
    values = [np.float32(v) for block in blocks for v in REFERENCE[kind](block)]
    return np.array(values, dtype=np.float32).reshape(ROWS, COLS)


def mlxctl_values(tmp_path, kind: str, blocks: list[bytes], scale_dtype=np.float32):
    path = tmp_path / f"{kind}.gguf"
    write_gguf(path, {}, [("blk.0.ffn_up.weight", (ROWS, COLS), kind, b"".join(blocks))])
    gguf = read_gguf(path)
    triplet = load_tensor(gguf, gguf.tensors[0], scale_dtype)
    w, scales, biases = triplet["weight"], triplet["scales"], triplet["biases"]
    bits = w.shape[-1] * 32 // COLS
    got = mx.dequantize(w, scales.astype(mx.float32), biases.astype(mx.float32), group_size=32, bits=bits)
    return np.array(got), triplet


@pytest.mark.parametrize("kind", EXACT)
def test_block_types_that_map_exactly_onto_mlx_groups_of_32(tmp_path, kind):
    blocks = random_blocks(kind)
    got, triplet = mlxctl_values(tmp_path, kind, blocks)
    assert triplet["weight"].dtype == mx.uint32
    assert triplet["weight"].shape == (ROWS, COLS * BITS[kind] // 32)
    assert triplet["scales"].shape == (ROWS, COLS // 32)
    np.testing.assert_array_equal(got, reference_values(kind, blocks))


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_32_value_block_types_are_exact_with_float16_scales_too(tmp_path, kind):
    """Their scale and bias (d, -8 d, -16 d, -128 d, m) are float16 values: no rounding."""
    blocks = random_blocks(kind)
    got, triplet = mlxctl_values(tmp_path, kind, blocks, np.float16)
    assert triplet["scales"].dtype == mx.float16
    np.testing.assert_array_equal(got, reference_values(kind, blocks))


def test_a_file_with_any_k_quant_gets_float32_scales(tmp_path):
    from mlxctl.models.gguf_decode import load_tensors

    tensors = [("blk.0.ffn_up.weight", (ROWS, COLS), "Q8_0", b"".join(random_blocks("Q8_0"))),
               ("blk.0.ffn_down.weight", (ROWS, COLS), "Q4_K", b"".join(random_blocks("Q4_K")))]  # fmt: skip
    write_gguf(tmp_path / "mix.gguf", {}, tensors)
    loaded = load_tensors(read_gguf(tmp_path / "mix.gguf"))
    assert {loaded[f"blk.0.{m}.scales"].dtype for m in ("ffn_up", "ffn_down")} == {mx.float32}
    write_gguf(tmp_path / "legacy.gguf", {}, tensors[:1])
    assert load_tensors(read_gguf(tmp_path / "legacy.gguf"))["blk.0.ffn_up.scales"].dtype == mx.float16


@pytest.mark.parametrize("kind", REQUANTISED)
def test_block_types_with_16_wide_sub_blocks_are_requantised_to_8_bits(tmp_path, kind):
    """Within half a step of the 8-bit group; the measured error is what docs/models.md states."""
    blocks = random_blocks(kind)
    got, triplet = mlxctl_values(tmp_path, kind, blocks)
    want = reference_values(kind, blocks)
    assert triplet["weight"].shape == (ROWS, COLS * REQUANT_BITS // 32)
    groups = want.reshape(-1, 32)
    half_step = (groups.max(1) - groups.min(1)) / 510
    err = np.abs(got - want).reshape(-1, 32)
    assert (err <= half_step[:, None] * (1 + 1e-4) + 1e-9).all()  # float32 rounding at ties
    relative = err.max(1) / np.maximum(groups.max(1) - groups.min(1), 1e-30)
    assert relative.max() <= (1 + 1e-4) / 510 and err.max() > 0


def test_a_q4_k_super_block_by_hand(tmp_path):
    """Sub-block 5 (high nibbles of the third 32 bytes): scale and min from the packed 6-bit pair."""
    raw = bytearray(144)
    raw[0:2], raw[2:4] = np.float16(0.5).tobytes(), np.float16(0.25).tobytes()
    raw[4 + 1] = (3 << 6) | 9  # sub-block 1: scale 9; top bits of sub-block 5's scale: 3
    raw[4 + 9] = (7 << 4) | 2  # sub-block 5: scale 2 | 3 << 4 = 50, min 7 | (top bits of byte 5) << 4
    raw[16 + 64 + 4] = 0xB0  # value 4 of sub-block 5 is 11
    blocks = [bytes(raw)] * (ROWS * COLS // 256)
    got, _ = mlxctl_values(tmp_path, "Q4_K", blocks)
    assert got[0, 5 * 32 + 4] == 0.5 * 50 * 11 - 0.25 * 7
    assert got[0, 5 * 32 + 5] == -0.25 * 7
    assert got[0, 32] == 0.0  # sub-block 1: scale 9 but min 0 and codes 0


@pytest.mark.parametrize("kind,dtype", [("F32", np.float32), ("F16", np.float16)])
def test_float_tensors_come_back_unchanged(tmp_path, kind, dtype):
    values = np.random.default_rng(1).normal(size=(ROWS, COLS)).astype(dtype)
    write_gguf(tmp_path / "f.gguf", {}, [("output_norm.weight", values.shape, kind, values.tobytes())])
    gguf = read_gguf(tmp_path / "f.gguf")
    np.testing.assert_array_equal(np.array(load_tensor(gguf, gguf.tensors[0])["weight"]), values)


def test_bf16_tensors_keep_their_bits(tmp_path):
    values = np.random.default_rng(2).normal(size=(ROWS, COLS)).astype(np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype(np.uint16)
    write_gguf(tmp_path / "b.gguf", {}, [("token_embd.weight", values.shape, "BF16", bf16.tobytes())])
    gguf = read_gguf(tmp_path / "b.gguf")
    got = load_tensor(gguf, gguf.tensors[0])["weight"]
    assert got.dtype == mx.bfloat16
    want = (bf16.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(np.array(got.astype(mx.float32)), want)


def test_a_tensor_cut_short_is_named(tmp_path):
    blocks = random_blocks("Q4_K")
    path = tmp_path / "cut.gguf"
    write_gguf(path, {}, [("blk.0.ffn_up.weight", (ROWS, COLS), "Q4_K", b"".join(blocks))])
    path.write_bytes(path.read_bytes()[:-200])
    gguf = read_gguf(path)
    with pytest.raises(ModelFormatError, match="'blk.0.ffn_up.weight' runs past the file's end"):
        load_tensor(gguf, gguf.tensors[0])


def test_a_row_that_does_not_fill_its_super_blocks_is_named(tmp_path):
    path = tmp_path / "odd.gguf"
    write_gguf(path, {}, [("blk.0.ffn_up.weight", (2, 128), "Q4_K", bytes(144))])
    gguf = read_gguf(path)
    with pytest.raises(ModelFormatError, match="rows of 128 do not fill Q4_K blocks"):
        load_tensor(gguf, gguf.tensors[0])
