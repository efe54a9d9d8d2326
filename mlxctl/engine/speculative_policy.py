"""Whether drafts pay, per batch size, measured while serving (engine/speculative_step.py asks
it before each decode-only step)."""

from __future__ import annotations


class Policy:
    """Whether drafts pay, per batch size, measured: moving averages of the tokens per second of
    speculative steps and of plain ones (steps that did nothing else). A size speculates until
    both are known, then while its speculative rate is at least the plain one; a size that
    stopped tries again after ``RECHECK`` plain steps (what the requests repeat changes), and
    after twice as many each time it is still behind, up to ``MAX_RECHECK``: where a check pass
    costs many plain steps (MLX's CUDA backend took about 78 ms for a 9-token check of a 1B
    model, against 3.5 ms a plain step: docs/benchmarks.md), rechecking every 32 steps had cost
    a third of the throughput. On a GPU a pass over a few tokens per row is meant to cost about
    one over one token, so drafts pay at every size up to ``MAX_ROWS``; on a CPU a batch is
    compute-bound and they do not."""

    RECHECK = 32
    MAX_RECHECK = 1024
    WEIGHT = 0.25  # of the newest step in the moving average

    def __init__(self) -> None:
        self.rates: dict[tuple[int, bool], float] = {}  # (rows, speculative) -> tokens/s
        self._plain_steps: dict[int, int] = {}  # rows -> plain steps since the last speculative one
        self._recheck: dict[int, int] = {}  # rows -> plain steps before the next check (doubles while behind)
        self._after_spec = False  # the plain step right after a speculative one only refills the pipeline
        self.counts = {"speculative": 0, "plain": 0}  # decode-only steps of each kind taken while speculating

    def choose(self, rows: int) -> bool:
        spec, plain = self.rates.get((rows, True)), self.rates.get((rows, False))
        if spec is None or (plain is not None and spec >= plain):
            self._recheck.pop(rows, None)
            return True
        if plain is None:
            return False
        waited, due = self._plain_steps.get(rows, 0) + 1, self._recheck.get(rows, self.RECHECK)
        if waited < due:
            self._plain_steps[rows] = waited
            return False
        self._plain_steps[rows] = 0
        self._recheck[rows] = min(2 * due, self.MAX_RECHECK)
        return True

    def record(self, rows: int, speculative: bool, tokens: int, seconds: float) -> None:
        """A step of ``rows`` rows that emitted ``tokens`` in ``seconds`` and ran no prompt work.
        A speculative step that found no draft counts as speculative: looking for drafts needs
        the pending tokens on the host, so such a step loses the pipeline's overlap, and text that
        seldom repeats must measure as what it costs."""
        self.counts["speculative" if speculative else "plain"] += 1
        refill, self._after_spec = self._after_spec and not speculative, speculative
        if refill or tokens <= 0 or seconds <= 0:
            return
        rate, key = tokens / seconds, (rows, speculative)
        old = self.rates.get(key)
        self.rates[key] = rate if old is None else old + self.WEIGHT * (rate - old)

    def snapshot(self) -> dict:
        """{batch size: {"speculative": tok/s, "plain": tok/s}} as measured so far."""
        out: dict = {}
        for (rows, speculative), rate in sorted(self.rates.items()):
            out.setdefault(str(rows), {})["speculative" if speculative else "plain"] = round(rate, 1)
        return out
