"""Synthetic prompts of about N tokens: common English words, about one token each."""

from __future__ import annotations

import random

# Short, frequent words: a single token with a leading space in the common BPE vocabularies.
WORDS = tuple("""
the of and to in is was for on are with as be at by this have from or one had not but what all
were when we there can an your which their said if do will each about how up out them then she
many some so these would other into has more her two like him see time could no make than first
been its who now people my made over did down only way find use may water long little very after
words called just where most know get through back much go good new write our me man too any day
same right look think also around another came come work three word must because does part even
place well such here take why things help put years different away again off went old number
""".split())


def synthetic_prompt(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens of random words (the server's count is what gets reported)."""
    return " ".join(rng.choice(WORDS) for _ in range(max(1, tokens)))


def prompt_rng(seed: int, *where: object) -> random.Random:
    """A generator seeded by the seed and a request's place, the same for every URL."""
    return random.Random(":".join(map(str, (seed, *where))))
