"""How MLX's quantized matmul scales with the number of rows M (decode batch size), against a
dense matmul of the same shape, and with the rows given as a decode step gives them, (M, 1, K): the question behind 8B 4-bit decode at 16 streams (issue 18).

  python scripts/probe_qmm.py [--shape 4096x4096,14336x4096] [--bits 4] [--rows 1,2,4,8,16,32,64,256]

Each figure is the median of --reps timed calls (after --warmup), one mx.eval per call, in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import mlx.core as mx


def _time(fn, reps: int, warmup: int) -> float:
    for _ in range(warmup):
        mx.eval(fn())
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        mx.eval(fn())
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def probe(out_dim: int, in_dim: int, bits: int, group: int, rows: list[int], reps: int, warmup: int) -> list[dict]:
    w = mx.random.normal((out_dim, in_dim)).astype(mx.bfloat16)
    wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
    mx.eval(w, wq, scales, biases)
    results = []

    def qmm(x):
        return mx.quantized_matmul(x, wq, scales, biases, transpose=True, group_size=group, bits=bits)

    for m in rows:
        x = mx.random.normal((m, in_dim)).astype(mx.bfloat16)
        mx.eval(x)
        dense = _time(lambda: x @ w.T, reps, warmup)
        quant = _time(lambda: qmm(x), reps, warmup)
        # A decode step's activations: one token per row, shape (rows, 1, in): MLX's CUDA kernels
        # take the leading dimension as a batch of 1-row problems over the same weight.
        per_row = x.reshape(m, 1, in_dim)
        quant_3d = _time(lambda: qmm(per_row), reps, warmup)
        results.append({"out": out_dim, "in": in_dim, "bits": bits, "rows": m, "dense_ms": round(dense, 4),
                        "quantized_ms": round(quant, 4), "quantized_over_dense": round(quant / dense, 2),
                        "quantized_rows_x1_ms": round(quant_3d, 4)})
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="4096x4096,14336x4096", help="comma-separated OUTxIN weight shapes")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--rows", default="1,2,4,8,16,32,64,256")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    print(json.dumps({"device": str(mx.default_device()), "mlx": mx.__version__}))
    for shape in args.shape.split(","):
        out_dim, in_dim = (int(s) for s in shape.split("x"))
        for r in probe(out_dim, in_dim, args.bits, args.group_size, rows, args.reps, args.warmup):
            print(json.dumps(r))


if __name__ == "__main__":
    main()
