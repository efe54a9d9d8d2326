"""Whether drafts pay, per batch size, measured while serving (engine/speculative_step.py asks
it before each decode-only step)."""

from __future__ import annotations

from collections import deque


class Policy:
    """Whether a step checks drafts. A check pays where the tokens it is expected to emit come
    at least as fast as a plain step's, that is where

        expected tokens of the check  >=  rows * (seconds of a check / seconds of a plain step).

    The two sides are kept apart because they change at different speeds. The cost ratio is the
    machine's, per batch size: what a check takes over what a plain step that did nothing else
    takes (on a GPU a check of a few tokens a row costs about one plain step, on a CPU a batch's
    check costs several). The expected tokens are the text's, per
    request (engine/speculative.py ``SpeculationStats.expect``): a stretch of text that does not
    repeat lowers one request's expectation until it has decoded some tokens plainly, and does
    not stop the engine from checking the next stretch that does. (An earlier policy compared
    moving averages of the tokens per second of both kinds of step: a few failed checks put a
    size behind for up to a thousand steps, and on an H100 it gave back a fifth of the edit-like
    prompt's gain: docs/benchmarks.md.)

    The cost is what steps usually take: the lower median of each kind's last ``SAMPLES``
    steps, and a size's first check is not counted, so a step that paid for building its
    kernels (MLX compiles a new shape's on first use: on an H100 that put a moving average's
    checks at dozens of plain steps, and both this policy and the one before declined almost
    every check after it) does not stand for the rest. A size checks until both costs are
    known. Where checks do not pay it checks again after ``RECHECK`` steps it declined, and
    after twice as many each time they still do not, up to ``MAX_RECHECK``, so the cost is
    measured again as the context grows (a recheck that finds no draft to check leaves the
    interval as it was). Where not even a check whose drafts are all taken whole could pay, the
    size waits ``MAX_RECHECK`` steps at once: a draft model that guesses slower than the target
    decodes costs a catch-up over every token it missed at each recheck, which the check's
    cost leaves out.

    A size that keeps checking measures no plain steps, so after ``REFRESH`` checks since its
    last plain one its plain cost is let go and measured again (two plain steps: the first
    only refills the pipeline). On an H100 a batch of 8 measured its few plain steps while MLX
    built their kernels (medians of 72 and 126 ms against 8-11 ms once built), and went on
    reading a check as a third of a plain step for the rest of the run (docs/benchmarks.md,
    issue 19, 2026-12-08)."""

    RECHECK = 32
    REFRESH = 64  # checks at a size since its last plain step before the plain cost is measured again
    MAX_RECHECK = 1024
    SAMPLES = 5  # steps of each kind a batch size's cost is the lower median of
    WEIGHT = 0.25  # of the newest step in the reported rates' moving averages

    def __init__(self) -> None:
        self.seconds: dict[tuple[int, bool], deque[float]] = {}  # (rows, speculative) -> the latest steps' seconds
        self._first_checked: set[int] = set()  # batch sizes whose first (uncounted) check ran
        self.rates: dict[tuple[int, bool], float] = {}  # (rows, speculative) -> tokens/s (reported)
        self._declined: dict[int, int] = {}  # rows -> steps declined since the last check
        self._recheck: dict[int, int] = {}  # rows -> declined steps before the next check (doubles)
        self._rechecking: dict[int, int] = {}  # rows -> the interval before a recheck's step (until it is recorded)
        self._after_spec = False  # the plain step right after a speculative one only refills the pipeline
        self._since_plain: dict[int, int] = {}  # rows -> checks counted since the size's last plain step
        self.counts = {"speculative": 0, "plain": 0}  # decode-only steps of each kind taken while speculating

    def cost(self, rows: int) -> float | None:
        """Seconds of a check over seconds of a plain step at ``rows``; None until both are known."""
        spec, plain = self.seconds.get((rows, True)), self.seconds.get((rows, False))
        return None if not spec or not plain else _lower_median(tuple(spec)) / _lower_median(tuple(plain))

    def choose(self, rows: int, expected: float, best: float | None = None) -> bool:
        """Whether a step of ``rows`` rows whose check is expected to emit ``expected`` tokens (and
        at most ``best``) checks."""
        self._rechecking.pop(rows, None)  # a recheck whose step was never recorded (it prefilled, or failed)
        if (rows, True) not in self.seconds:
            return True
        if self._since_plain.get(rows, 0) >= self.REFRESH:
            self._since_plain[rows] = 0
            self.seconds.pop((rows, False), None)  # stale: measured again before the next check
        cost = self.cost(rows)
        if cost is None:
            return False  # the plain side is measured first
        if expected >= rows * cost:
            self._recheck.pop(rows, None)
            self._declined[rows] = 0
            return True
        if best is not None and best < rows * cost:
            # not even drafts taken whole would pay (a draft model slower than the target, as the
            # 4-bit SmolLM2 is on a CPU): rechecks, and a draft model's catching up, come seldom
            self._recheck[rows] = self.MAX_RECHECK
        waited, due = self._declined.get(rows, 0) + 1, self._recheck.get(rows, self.RECHECK)
        if waited < due:
            self._declined[rows] = waited
            return False
        self._declined[rows] = 0
        self._recheck[rows], self._rechecking[rows] = min(2 * due, self.MAX_RECHECK), due
        return True

    def record(self, rows: int, speculative: bool, tokens: int, seconds: float, checks: int = 1) -> None:
        """A step of ``rows`` rows that emitted ``tokens`` in ``seconds``, ran no prompt work and,
        if ``speculative``, ran ``checks`` checks (several where a lone request's checks chain;
        none where it looked for drafts and found none). Such a step counts as speculative in
        the rates (looking for drafts needs the pending tokens on the host, so it loses the
        pipeline's overlap), but only checks say what a check costs."""
        self.counts["speculative" if speculative else "plain"] += 1
        due = self._rechecking.pop(rows, None)
        if due is not None and speculative and checks < 1:
            self._recheck[rows] = due  # a recheck that found no draft measured nothing: the interval stays
        refill, self._after_spec = self._after_spec and not speculative, speculative
        if refill or tokens <= 0 or seconds <= 0:
            return
        key, rate = (rows, speculative), tokens / seconds
        old = self.rates.get(key)
        self.rates[key] = rate if old is None else old + self.WEIGHT * (rate - old)
        if speculative and checks < 1:
            return
        if speculative and rows not in self._first_checked:
            self._first_checked.add(rows)  # it may have built its kernels: not what a check costs
            return
        self._since_plain[rows] = self._since_plain.get(rows, 0) + 1 if speculative else 0
        self.seconds.setdefault(key, deque(maxlen=self.SAMPLES)).append(seconds / (checks if speculative else 1))

    def skipped(self, speculative: bool) -> None:
        """A step not measured (it also ran prompt work): a plain step after a speculative one
        still only refills the pipeline."""
        self._after_spec = speculative

    def snapshot(self) -> dict:
        """{batch size: {"speculative": tok/s, "plain": tok/s, "check_cost": plain steps a check
        costs}} as measured so far."""
        out: dict = {}  # read from other threads (/v1/status) while the engine thread records: copies first
        for (rows, speculative), rate in sorted(list(self.rates.items())):
            out.setdefault(str(rows), {})["speculative" if speculative else "plain"] = round(rate, 1)
        for rows in {rows for rows, _ in list(self.seconds)}:
            cost = self.cost(rows)
            if cost is not None:
                out.setdefault(str(rows), {})["check_cost"] = round(cost, 2)
        return out


def _lower_median(values: tuple[float, ...]) -> float:
    return sorted(values)[(len(values) - 1) // 2]
