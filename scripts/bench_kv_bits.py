#!/usr/bin/env python3
"""Quantised KV (``--kv-bits 8|4``, issue 20): memory per token, greedy agreement, capacity.

  python scripts/bench_kv_bits.py [--model smollm2-135m] [--dtype auto] [--bits 16,8,4]
         [--group-size 64] [--fill-tokens 500] [--tokens 2000] [--budget-gb 1.0]
         [--seq-tokens 4096] [--json] [--out FILE]

  e.g. LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 \\
       python scripts/bench_kv_bits.py --model /tmp/smol-f32 --dtype float32 --tokens 2000

For each KV setting in --bits (16 or 0: unquantised, the model's own activation dtype; 8 or 4:
``mlxctl.engine.kv.quantized.make_cache`` with ``KVQuant(bits, --group-size)``):

1. KV bytes per token. One prefill of --fill-tokens tokens fills a fresh cache; the bytes are
   those of the cache layers' arrays sliced to the filled positions (a ``QuantizedKV``'s packed
   values, scales and biases; a plain layer's keys and values), so the spare room the caches
   allocate in steps of 256 is not counted (it is reported apart, as "allocated"). Next to it
   the analytic figure: layers x kv_heads x head_dim x 2 (keys, values) x bytes per value, with
   ``KVQuant.bytes_per_value`` (bits/8 + 2 x dtype bytes / group size when quantised). Only
   plain KV layers are counted (sliding-window and recurrent layers are left as they are).
2. Greedy agreement with the unquantised KV. A fixed chat-templated prompt (a few hundred
   tokens asking for a long story) is prefilled into one cache per setting; then a plain python
   loop decodes --tokens tokens greedily with the unquantised cache (the reference), and feeds
   the same reference tokens to every quantised cache in lockstep (teacher forcing, so the runs
   stay aligned after the first divergence). Per setting: the first position (0 = the first
   generated token) where its argmax differs from the reference token, the share of positions
   where it agrees, and the Pearson correlation of its logits with the reference's over the
   full vocabulary (float32), mean and minimum over positions. EOS is ignored: decoding goes on
   to the full length. Each model call is timed (evaluated) alone: ms/token per setting.
3. Capacity: how many --seq-tokens sequences fit --budget-gb GiB (1 GiB = 2**30 bytes, as the
   CLI's --*-gb options): budget // (bytes per token x seq tokens), with the measured figure.

Prints a table, or with --json one JSON object with the figures and provenance (model, dtype,
mlx and mlx-lm versions, the command line); --out FILE also writes that object to FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = (
    "I am putting together a collection of bedtime stories for my niece, who is eight years old and loves "
    "dragons, cooking, rainy days and maps of imaginary places. I would like you to write a long story for "
    "the collection, at least two thousand words, told in many short chapters with a title for each.\n\n"
    "The story is about a young dragon called Ember who lives alone in a cave above a small fishing village. "
    "Ember is curious and kind but clumsy, and the villagers are a little afraid of her because she once "
    "sneezed and set fire to the harbour master's boat. One winter the village cook falls ill just before "
    "the great midwinter feast, and Ember decides to learn to cook so that the feast can still happen. "
    "She has to learn everything from the beginning: how to light an oven without melting it, how to "
    "knead bread with claws, how to be patient while soup simmers, and how to ask for help.\n\n"
    "Please include these things in the story: an old map that shows where the best wild mushrooms grow; "
    "a grumpy cat who becomes Ember's friend; a storm that knocks out the bridge to the market town; "
    "at least three recipes that Ember invents, each described step by step with its ingredients; a "
    "mistake that goes badly wrong and how Ember puts it right; and a feast at the end where the whole "
    "village sits together. Describe the sounds, the smells and the weather in detail. Give the villagers "
    "names and small habits so that they feel real. Let the chapters end gently, because the story will "
    "be read aloud at bedtime, and finish with a short poem that Ember writes for the cook.\n\n"
    "Take your time and do not summarise: tell the whole story from the first page to the last."
)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", help="model reference (catalog name, folder, repo id)")
    p.add_argument("--dtype", default="auto", help="weight dtype: auto, native, float32, float16, bfloat16")
    p.add_argument("--bits", default="16,8,4", help="comma-separated KV settings: 16 (or 0) unquantised, 8, 4")
    p.add_argument("--group-size", type=int, default=64, help="quantisation group size (32, 64, 128)")
    p.add_argument("--fill-tokens", type=int, default=500,
                   help="tokens filled for the bytes-per-token measurement (not a multiple of 256, so "
                        "the caches hold spare room that must not be counted)")
    p.add_argument("--tokens", type=int, default=2000, help="greedy positions compared with the reference")
    p.add_argument("--budget-gb", type=float, default=1.0, help="KV budget in GiB for the capacity figure")
    p.add_argument("--seq-tokens", type=int, default=4096, help="tokens per sequence for the capacity figure")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--out", default=None, help="also write the JSON object to this file (with the table printed)")
    return p.parse_args()


def settings(spec: str) -> list[int]:
    """The --bits list as KV bits, 0 for unquantised (given as 16 or 0), unquantised first."""
    out = []
    for part in spec.split(","):
        bits = int(part)
        bits = 0 if bits in (0, 16) else bits
        if bits not in (0, 4, 8):
            raise SystemExit(f"--bits: {part} is not 16, 8 or 4")
        if bits not in out:
            out.append(bits)
    return sorted(out, key=lambda b: (b != 0, -b))


def label(bits: int, kv_dtype: str, group_size: int) -> str:
    return f"16/unq ({kv_dtype})" if bits == 0 else f"{bits}-bit g{group_size}"


def new_cache(model, bits: int, group_size: int) -> list:
    from mlxctl.engine.kv.quantized import make_cache
    from mlxctl.engine.kv_config import KVQuant

    return make_cache(model, KVQuant(bits, group_size))


def kv_layers(cache: list) -> list:
    """The plain KV layers of a cache: mlx-lm's KVCache or QuantizedKV (what --kv-bits changes)."""
    from mlx_lm.models.cache import KVCache

    from mlxctl.engine.kv.quantized import QuantizedKV

    return [c for c in cache if type(c) is KVCache or isinstance(c, QuantizedKV)]


def layer_arrays(layer) -> list:
    """A KV layer's arrays: keys and values, or for a quantised one their (packed, scales, biases)."""
    if isinstance(layer.keys, (tuple, list)):
        return [*layer.keys, *layer.values]
    return [layer.keys, layer.values]


def model_dims(config: dict) -> tuple[int, int, int]:
    """(layers, kv heads, head dim) from the model's config (its text part for multimodal ones)."""
    cfg = config.get("text_config") or config
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    return cfg["num_hidden_layers"], kv_heads, head_dim


def bytes_per_token(loaded, bits: int, group_size: int, fill: int) -> dict:
    """Fill a fresh cache with ``fill`` tokens (one prefill); its KV bytes per token, measured
    on the filled positions and as allocated (the spare room included)."""
    import mlx.core as mx

    cache = new_cache(loaded.model, bits, group_size)
    vocab = loaded.config.get("vocab_size") or (loaded.config.get("text_config") or {}).get("vocab_size", 32000)
    ids = [(17 + 7919 * i) % min(vocab, 32000) + 100 for i in range(fill)]  # any tokens will do
    mx.eval(loaded.model(mx.array([ids]), cache=cache))
    layers = kv_layers(cache)
    for layer in layers:
        mx.eval(layer_arrays(layer))
    offsets = {int(layer.offset) for layer in layers}
    assert offsets == {fill}, f"cache offsets {offsets}, expected {fill}"
    used = sum(x[..., :fill, :].nbytes for layer in layers for x in layer_arrays(layer))
    allocated = sum(x.nbytes for layer in layers for x in layer_arrays(layer))
    first = layers[0]
    kv_dtype = (first.keys[1] if isinstance(first.keys, (tuple, list)) else first.keys).dtype
    return {"layers_counted": len(layers), "layers_total": len(cache), "kv_dtype": str(kv_dtype).split(".")[-1],
            "dtype_bytes": kv_dtype.size, "bytes_per_token": used / fill, "allocated_per_token": allocated / fill,
            "allocated_positions": first.keys[0].shape[2] if isinstance(first.keys, (tuple, list))
            else first.keys.shape[2]}


def weight_dtype(model) -> str:
    """The dtype most of the model's parameters (by count) are held in."""
    from collections import Counter

    from mlx.utils import tree_flatten

    counts = Counter()
    for _, w in tree_flatten(model.parameters()):
        counts[str(w.dtype).split(".")[-1]] += w.size
    return counts.most_common(1)[0][0]


def pearson(a, b) -> float:
    import mlx.core as mx

    a, b = a.astype(mx.float32), b.astype(mx.float32)
    da, db = a - a.mean(), b - b.mean()
    return ((da * db).sum() / mx.sqrt((da * da).sum() * (db * db).sum())).item()


def agreement(loaded, bits_list: list[int], group_size: int, n_tokens: int) -> dict:
    """Greedy with the unquantised KV; every quantised setting teacher-forced on its tokens."""
    import mlx.core as mx

    from mlxctl.api.prompt import chat_messages, render_chat

    model = loaded.model
    prompt = render_chat(loaded.tokenizer, chat_messages(PROMPT))
    quant = [b for b in bits_list if b != 0]
    caches = {b: new_cache(model, b, group_size) for b in [0, *quant]}
    secs = {b: 0.0 for b in caches}
    stats = {b: {"first_diff": None, "agree": 0, "corr": []} for b in quant}
    ref_tokens: list[int] = []

    def step(tokens: list[int]) -> dict:
        out = {}
        for b, cache in caches.items():
            start = time.perf_counter()
            logits = model(mx.array([tokens]), cache=cache)[0, -1].astype(mx.float32)
            mx.eval(logits)
            secs[b] += time.perf_counter() - start
            out[b] = logits
        return out

    prefill_start = time.perf_counter()
    logits = step(prompt)
    prefill_s = time.perf_counter() - prefill_start
    secs = {b: 0.0 for b in caches}  # decode time only
    for pos in range(n_tokens):
        ref = int(mx.argmax(logits[0]).item())
        ref_tokens.append(ref)
        for b in quant:
            s = stats[b]
            if int(mx.argmax(logits[b]).item()) == ref:
                s["agree"] += 1
            elif s["first_diff"] is None:
                s["first_diff"] = pos
            s["corr"].append(pearson(logits[0], logits[b]))
        if pos + 1 < n_tokens:
            logits = step([ref])
    eos = set(loaded.eos_token_ids or ())
    result = {"prompt_tokens": len(prompt), "tokens": n_tokens, "prefill_s_all_settings": round(prefill_s, 2),
              "reference_eos_positions": [i for i, t in enumerate(ref_tokens) if t in eos][:20],
              "reference_text_head": loaded.tokenizer.decode(ref_tokens[:120]),
              "runs": {}}
    steps = max(n_tokens - 1, 1)
    result["runs"][0] = {"first_diff": None, "agree": 1.0, "corr_mean": 1.0, "corr_min": 1.0,
                         "ms_per_token": round(1000 * secs[0] / steps, 2), "reference": True}
    for b in quant:
        s = stats[b]
        result["runs"][b] = {"first_diff": s["first_diff"], "agree": s["agree"] / n_tokens,
                             "corr_mean": sum(s["corr"]) / len(s["corr"]), "corr_min": min(s["corr"]),
                             "corr_min_pos": s["corr"].index(min(s["corr"])),
                             "ms_per_token": round(1000 * secs[b] / steps, 2)}
    return result


def main() -> int:
    args = parse()
    import mlx.core as mx
    import mlx_lm

    from mlxctl.engine.kv_config import KVQuant
    from mlxctl.generation import model_loader

    bits_list = settings(args.bits)
    for b in bits_list:
        KVQuant(b, args.group_size)  # refuses a bad group size before the model loads
    started = time.perf_counter()
    loaded = model_loader(args.model, args.dtype, lambda m: print(m, file=sys.stderr))()
    load_s = time.perf_counter() - started
    layers, kv_heads, head_dim = model_dims(loaded.config)
    for b in bits_list:
        KVQuant(b, args.group_size).check_head_dim(head_dim)

    budget = int(args.budget_gb * (1 << 30))
    memory: dict[int, dict] = {}
    for b in bits_list + ([0] if 0 not in bits_list else []):
        m = bytes_per_token(loaded, b, args.group_size, args.fill_tokens)
        bpv = KVQuant(b, args.group_size).bytes_per_value(m["dtype_bytes"])
        m["bytes_per_value"] = bpv
        m["analytic_per_token"] = layers * kv_heads * head_dim * 2 * bpv
        m["agrees"] = abs(m["analytic_per_token"] - m["bytes_per_token"]) < 1e-6 * m["bytes_per_token"]
        m["seqs_in_budget"] = int(budget // (m["bytes_per_token"] * args.seq_tokens))
        memory[b] = m
    kv_dtype = memory[0]["kv_dtype"]
    for b in memory:
        memory[b]["vs_unquantised"] = memory[b]["bytes_per_token"] / memory[0]["bytes_per_token"]

    agree_start = time.perf_counter()
    greedy = agreement(loaded, bits_list, args.group_size, args.tokens)
    agree_s = time.perf_counter() - agree_start

    result = {
        "provenance": {
            "model_ref": args.model, "model": loaded.name, "dtype": args.dtype,
            "weight_dtype": weight_dtype(loaded.model),
            "kv_dtype": kv_dtype, "mlx": mx.__version__, "mlx_lm": mlx_lm.__version__,
            "device": str(mx.default_device()), "python": platform.python_version(), "platform": platform.platform(),
            "ld_preload": os.environ.get("LD_PRELOAD", ""),
            "command": shlex.join([sys.executable, *sys.argv]),
        },
        "config": {"bits": bits_list, "group_size": args.group_size, "fill_tokens": args.fill_tokens,
                   "tokens": args.tokens, "budget_gib": args.budget_gb, "budget_bytes": budget,
                   "seq_tokens": args.seq_tokens, "layers": layers, "kv_heads": kv_heads, "head_dim": head_dim},
        "settings": {},
        "greedy": {k: v for k, v in greedy.items() if k != "runs"},
        "timing_s": {"load": round(load_s, 1), "agreement": round(agree_s, 1),
                     "total": round(time.perf_counter() - started, 1)},
    }
    for b in bits_list:
        m, g = memory[b], greedy["runs"][b]
        result["settings"][str(16 if b == 0 else b)] = {
            "label": label(b, kv_dtype, args.group_size),
            "bytes_per_token_measured": m["bytes_per_token"], "bytes_per_token_analytic": m["analytic_per_token"],
            "measured_equals_analytic": m["agrees"], "allocated_per_token": m["allocated_per_token"],
            "allocated_positions": m["allocated_positions"], "bytes_per_value": m["bytes_per_value"],
            "vs_unquantised": round(m["vs_unquantised"], 4), "kv_layers": m["layers_counted"],
            "seqs_in_budget": m["seqs_in_budget"], **g,
        }

    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    p, c = result["provenance"], result["config"]
    print(f"{p['model']} ({p['model_ref']}, --dtype {p['dtype']}, weights {p['weight_dtype']}, KV {kv_dtype}), "
          f"mlx {p['mlx']}, mlx-lm {p['mlx_lm']}, {p['device']}")
    print(f"{layers} KV layers x {kv_heads} kv heads x {head_dim} head dim, group size {args.group_size}")
    print(f"\nKV bytes per token ({args.fill_tokens} tokens filled; allocated = with the caches' spare room), "
          f"and {args.seq_tokens}-token sequences in {args.budget_gb:g} GiB:")
    print(f"  {'setting':<18} {'measured':>10} {'analytic':>10} {'equal':>6} {'allocated':>10} {'vs unq':>7} "
          f"{'seqs':>6}")
    for s in result["settings"].values():
        print(f"  {s['label']:<18} {s['bytes_per_token_measured']:>10.1f} {s['bytes_per_token_analytic']:>10.1f} "
              f"{str(s['measured_equals_analytic']):>6} {s['allocated_per_token']:>10.1f} "
              f"{s['vs_unquantised']:>7.3f} {s['seqs_in_budget']:>6}")
    g = result["greedy"]
    print(f"\nGreedy agreement with the unquantised KV: {g['prompt_tokens']}-token chat prompt, {args.tokens} "
          f"teacher-forced positions (reference EOS at {g['reference_eos_positions'] or 'none'}, ignored):")
    print(f"  {'setting':<18} {'first diff':>10} {'agree':>8} {'corr mean':>10} {'corr min':>10} {'(at)':>6} "
          f"{'ms/token':>9}")
    for s in result["settings"].values():
        if s.get("reference"):
            print(f"  {s['label']:<18} {'(reference)':>10} {'':>8} {'':>10} {'':>10} {'':>6} {s['ms_per_token']:>9.2f}")
            continue
        first = "none" if s["first_diff"] is None else str(s["first_diff"])
        print(f"  {s['label']:<18} {first:>10} {s['agree']:>8.2%} {s['corr_mean']:>10.6f} {s['corr_min']:>10.6f} "
              f"{s['corr_min_pos']:>6} {s['ms_per_token']:>9.2f}")
    print(f"\nreference starts: {g['reference_text_head']!r}")
    t = result["timing_s"]
    print(f"load {t['load']} s, agreement {t['agreement']} s, total {t['total']} s")
    print(f"command: {p['command']}" + (f"  (LD_PRELOAD={p['ld_preload']})" if p["ld_preload"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
