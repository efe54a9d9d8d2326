"""A cap on thinking tokens, enforced by closing thinking early.

The server keeps one :class:`ThinkingBudget` per request next to its reasoning parser. For every
generated token that the parser counts as thinking (``parser.in_reasoning`` before the token's
text is fed), it calls :meth:`ThinkingBudget.on_token`. Once :attr:`ThinkingBudget.exceeded` is
True, the server force-closes thinking: it tokenizes :attr:`ThinkingBudget.closing_text` and feeds
those tokens into the generation as if the model had produced them (so the model continues with
its answer, and grammar constraints that wait for the parser's ``end_marker`` can start), and it
feeds the same text to the reasoning parser, which then leaves reasoning. A budget of 0 closes
thinking before the first thinking token.
"""

from __future__ import annotations

from mlxctl.api.reasoning.registry import get_parser
from mlxctl.errors import BadInputError


class ThinkingBudget:
    """Counts thinking tokens against ``budget_tokens`` for the format of parser ``parser``."""

    def __init__(self, budget_tokens: int, parser: str):
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
            raise BadInputError(f"the thinking budget must be a whole number of tokens >= 0, not {budget_tokens!r}")
        self.budget_tokens = budget_tokens
        self.parser_name = parser
        self.closing_text: str = get_parser(parser).closing_text  # text that closes thinking
        self.used = 0  # thinking tokens counted so far

    def on_token(self, count: int = 1) -> bool:
        """Count ``count`` generated thinking tokens; returns :attr:`exceeded`."""
        self.used += count
        return self.exceeded

    @property
    def exceeded(self) -> bool:
        """True once the thinking tokens reach the budget: the server must close thinking now."""
        return self.used >= self.budget_tokens

    @property
    def remaining(self) -> int:
        return max(0, self.budget_tokens - self.used)
