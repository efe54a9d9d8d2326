"""``general.file_type``: the name llama.cpp gives a GGUF's quantisation mix (15 = Q4_K_M).

The tensor types alone do not say it: a Q4_K_M file holds Q4_K, Q6_K and, where rows are not a
multiple of 256, Q5_0 and Q8_0 tensors. Values are llama.cpp's ``llama_ftype`` (llama.h).
"""

from __future__ import annotations

FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip


def file_type_name(value: object) -> str | None:
    """``Q4_K_M`` for 15; ``file type N`` for a number llama.cpp does not define; None if absent."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return FILE_TYPES.get(value, f"file type {value}")
