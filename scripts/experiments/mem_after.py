"""What MLX still holds after an engine's rounds (does the kept-rows copy pin old buffers?).

    python scripts/experiments/mem_after.py MODEL_DIR STREAMS

Two rounds of STREAMS requests (542-token prompts sharing 27 tokens, 128 new tokens, as
``bench_engine.py``), MLX's pool returned after each; prints the peak, what stays active (weights,
the prefix cache) and what stays after the engine shuts down."""
import gc
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]


def main() -> None:
    import mlx.core as mx
    from bench_engine import engine_batch, prompts

    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.generation import model_loader

    model, streams = sys.argv[1], int(sys.argv[2])
    loaded = model_loader(model, "native", lambda m: None)()
    mx.eval(loaded.model.parameters())
    gib = float(1 << 30)
    print(f"weights: {mx.get_active_memory() / gib:.2f} GiB active", flush=True)
    engine = Engine(lambda: loaded, EngineConfig()).start()
    for seed in (1, 2):
        mx.reset_peak_memory()
        tps = engine_batch(engine, prompts(loaded, 542, streams, seed, 27), 128)
        mx.clear_cache()
        print(f"round {seed}: {tps:.0f} tok/s, peak {mx.get_peak_memory() / gib:.2f} GiB, active after "
              f"{mx.get_active_memory() / gib:.2f} GiB, prefix cache {engine.prefix.stats()['bytes'] / gib:.2f} GiB",
              flush=True)
    engine.shutdown()
    del engine
    gc.collect()
    mx.clear_cache()
    print(f"after shutdown: {mx.get_active_memory() / gib:.2f} GiB active", flush=True)


if __name__ == "__main__":
    main()
