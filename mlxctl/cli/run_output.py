"""How `run` shows a generation: streamed text, or one JSON object; stats on stderr."""

from __future__ import annotations

from mlxctl.cli.output import Output
from mlxctl.engine.stats_line import stats_line
from mlxctl.engine.streams import Completion, RequestStream, gather_events


def print_stream(out: Output, stream: RequestStream, model_name: str, verbose: bool) -> None:
    events = []
    for event in stream:
        events.append(event)
        if not out.is_json and event.text:
            out.text(event.text)
    done = gather_events(events)
    if out.is_json:
        out.data(completion_json(done, model_name))
    elif not done.text.endswith("\n"):
        out.text("\n")
    if verbose:
        out.message(stats_line(done))


def completion_json(done: Completion, model_name: str) -> dict:
    t = done.timings
    result = {
        "model": model_name,
        "text": done.text,
        "finish_reason": done.finish_reason.value,
        "usage": {"prompt_tokens": done.usage.prompt_tokens, "completion_tokens": done.usage.completion_tokens,
                  "total_tokens": done.usage.total_tokens},
        "timings": {"ttft_s": t.ttft_s, "prompt_tps": t.prefill_tps, "decode_tps": t.decode_tps, "e2e_s": t.e2e_s},
    }
    if t.draft_tokens:  # --speculative: draft tokens checked and accepted
        result["timings"].update(draft_tokens=t.draft_tokens, accepted_tokens=t.accepted_tokens)
    if done.logprobs is not None:
        result["logprobs"] = [
            {"token_id": lp.token_id, "logprob": lp.logprob,
             "top": [{"token_id": a.token_id, "logprob": a.logprob} for a in lp.top]}
            for lp in done.logprobs
        ]
    return result
