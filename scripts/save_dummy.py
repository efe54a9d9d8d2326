#!/usr/bin/env python3
"""Write a dummy-weight model folder (random weights, real architecture, SmolLM2 tokenizer).

  python scripts/save_dummy.py --preset llama-3.2-1b --dtype bfloat16 --out /tmp/llama1b

Any server that loads MLX folders (mlxctl serve, mlx_lm.server) can then serve the same
weights, so benchmarks compare engines on identical work without downloading anything.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="llama-3.2-1b")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args()

    import mlx.core as mx
    from mlx.utils import tree_flatten

    from mlxctl.models.dummy import build_model, dummy_config, materialise, silence_unknown_tokens
    from mlxctl.models.dummy_quantize import quantize_dummy
    from mlxctl.models.resolve import resolve_model

    _, config = dummy_config(args.preset)
    model = build_model(config)
    model.set_dtype(getattr(mx, args.dtype))
    tokenizer = resolve_model(None).path
    silence_unknown_tokens(model, len(json.loads((tokenizer / "tokenizer.json").read_text())["model"]["vocab"]))
    quantization = quantize_dummy(model, config)  # a preset with a quantization key is saved quantised
    if quantization is not None:
        config["quantization"] = quantization
    materialise(model)
    args.out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(args.out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (args.out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, args.out / name)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
