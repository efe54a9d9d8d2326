"""A step's prompt work: which prompts go through the model together, which chunk by chunk,
and when a finished prompt's blocks go to the prefix cache.

Runs on the engine thread only. ``PromptWork.run`` takes the scheduler's plan for the step
(``(request, tokens)`` pairs) and returns the :class:`Joiner` s: requests whose prompts are
done, with their caches and first tokens, ready to join the decode batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from mlxctl.engine.batch import extract_row, stacked_rows
from mlxctl.engine.request import Request
from mlxctl.errors import MlxctlError

PAD_FREE = 256  # a padded group pass of at most this many tokens goes whatever its padding (short tails)


@dataclass(frozen=True)
class Joiner:
    """Requests whose prompts are done, ready to join the decode batch."""

    requests: list[Request]
    cache: list[Any]  # one request's plain cache, or a group's batched cache
    first: Any  # BatchSample: their first tokens
    batched: bool = False
    left: list[int] | None = None  # a batched cache's left padding per row


class PromptWork:
    """Prefills the step's prompts with ``runner`` (engine.runner.ModelRunner), keeping their
    blocks in ``prefix`` (engine.prefix.PrefixReuse); ``fail`` ends a request whose input
    cannot be prefilled (an image that cannot be read): retrying could not help it."""

    def __init__(self, runner: Any, prefix: Any, fail: Callable[[Request, MlxctlError], None], pace: Any = None):
        self.runner = runner
        self.pace = pace  # scheduler.PrefillPace: told what each chunk evaluated in the step cost
        self.prefix = prefix
        self._fail = fail
        self._held: list[tuple[Request, list[Any]]] = []  # prompts whose blocks wait for their first token

    def run(self, work: list[tuple[Request, int]]) -> list[Joiner]:
        """Prompts that end this step go through the model together (see ``_group``); the
        rest chunk by chunk, alone. Prompts with images are always prefilled alone (from input embeddings); they join the
        same decode batch as the others once their prompt is done."""
        start = time.perf_counter()
        group = self._group([req for req, n in work if n == req.prompt_left and not req.images])
        # what runs: a grouped prompt's whole rest (more than planned where _group cut its hit), the others' plan
        tokens = sum(r.prompt_left for r in group) + sum(n for req, n in work if req not in group)
        solo = [j for req, n in work if req not in group and (j := self._alone(req, n))]
        joined = self._together(group) if group else None
        joiners = ([joined] if joined else []) + solo
        self._measure(tokens, joiners, start)
        return joiners

    def _group(self, ends: list[Request]) -> list[Request]:
        """Of the prompts that end this step, those that go through the model together (the
        others go alone): fresh ones, and where the model's KV is plain also those that hold
        KV already (a prefix-cache hit, earlier chunks). Hits a few tokens apart are cut to
        the least first (``PrefixReuse.align_hits``: a step may then run up to
        ``align_tokens`` more prompt tokens a row than planned). Padded to the longest, so
        while more than half of over PAD_FREE padded tokens would be padding the longest goes
        alone (for a row whose hit was cut, the rest of its prompt waits for the next step)."""
        if len(ends) < 2 or self.prefix.checkpoints or not self.runner.can_batch_prefill(ends):
            return []
        for req in ends:  # a short hit would send the whole group through the merged-cache path
            self.prefix.let_short_hit_go(req)
        if any(r.num_prefilled for r in ends) and not self.runner.can_batch_tails(ends):
            ends = [r for r in ends if not r.num_prefilled]
        self.prefix.align_hits(ends)  # rows a few tokens apart run without left padding
        group = sorted(ends, key=lambda r: r.prompt_left)
        while len(group) >= 2 and PAD_FREE < len(group) * group[-1].prompt_left > 2 * sum(r.prompt_left for r in group):
            group.pop()
        return [r for r in ends if r in group] if len(group) >= 2 else []

    def _measure(self, tokens: int, joiners: list[Joiner], start: float) -> None:
        """Tell the pace what the step's prompt work cost. Chunks before a prompt's last are
        evaluated as they run; a finished prompt's last pass is only queued (its first token is
        read with the next step's), so a step that finished prompts is timed only now and then,
        waiting for that pass: the wait costs the overlap of the device with the host's work."""
        if self.pace is None or not tokens:
            return
        if joiners:
            if not self.pace.wants_sample():
                return
            import mlx.core as mx

            mx.eval([j.first.tokens for j in joiners])
        self.pace.record(tokens, time.perf_counter() - start)

    def _together(self, reqs: list[Request]) -> Joiner:
        now = time.perf_counter()
        for req in reqs:
            req.prefill_start = req.prefill_start or now
        cache, first, left = self.runner.prefill_group(reqs)  # a failure fails the step: recovered, retried
        for req in reqs:
            req.num_prefilled = req.prefill_len
            req.first_sampled = req.first_sampled or time.perf_counter()
        return Joiner(reqs, cache, first, batched=True, left=left)

    def _alone(self, req: Request, n: int) -> Joiner | None:
        if req.prefill_start is None:
            req.prefill_start = time.perf_counter()
        try:
            first = self._chunk(req, n)
        except MlxctlError as exc:  # bad input: retrying cannot help
            self._fail(req, exc)
            return None
        if first is None:
            return None
        req.first_sampled = req.first_sampled or time.perf_counter()
        return Joiner([req], req.cache, first)

    def _chunk(self, req: Request, n: int) -> Any:
        """The next ``n`` prompt tokens, stopping at each checkpoint position on the way to
        keep the state there (models served from checkpoints; see engine/checkpoints.py)."""
        end = req.num_prefilled + n
        while req.checkpoint_at and req.checkpoint_at[0] <= end:
            cut = req.checkpoint_at.pop(0)
            if cut > req.num_prefilled:
                self.runner.prefill(req, cut - req.num_prefilled)  # a cut is before the last token: no sample
                self.prefix.checkpoint(req.prefill_tokens[:cut], req.cache, req.cache_salt)
        return self.runner.prefill(req, end - req.num_prefilled) if end > req.num_prefilled else None

    def hold(self, joiner: Joiner) -> None:
        """Keep the finished prompts' blocks once their first tokens are out (``remember_held``,
        next step): copying a long prompt's blocks took a third of a cold 16k-token prompt's
        time to first token on the H200. Their KV below the prompt's end is never rewritten by
        the decode steps in between, and a batched group's rows are extracted now, before the
        batch reorders its rows."""
        if not self.prefix.enabled or self.prefix.checkpoints:  # (checkpoints were taken while prefilling)
            return
        rows = stacked_rows(joiner.cache, joiner.left) if joiner.batched and self.prefix.stacks else None
        for row, req in enumerate(joiner.requests):
            cache = rows[row] if rows else \
                extract_row(joiner.cache, row, joiner.left) if joiner.batched else joiner.cache
            self._held.append((req, cache))

    def remember_held(self) -> None:
        for req, cache in self._held:
            self.prefix.remember_prompt(req, cache)
        self._held.clear()

    def drop_held(self) -> None:
        """After a failed step: the held KV may come from it."""
        self._held.clear()
