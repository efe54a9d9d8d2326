"""One human-readable line of a finished generation's timings (``run --verbose``, the MCP loop)."""

from __future__ import annotations

from mlxctl.engine.streams import Completion


def stats_line(done: Completion) -> str:
    t = done.timings
    spec = f" | draft: {t.accepted_tokens} of {t.draft_tokens} accepted" if t.draft_tokens else ""
    return (f"prompt: {t.prompt_tokens} tokens, {t.prefill_tps:.1f} tok/s | "
            f"generation: {t.completion_tokens} tokens, {t.decode_tps:.1f} tok/s{spec} | "
            f"TTFT {t.ttft_s:.3f} s | total {t.e2e_s:.2f} s | finish: {done.finish_reason.value}")
