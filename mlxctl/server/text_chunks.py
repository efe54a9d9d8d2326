"""A request's text in streaming chunks of ``stream_interval`` tokens, keeping its token ids."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mlxctl.engine.events import FinishEvent, TokenEvent
from mlxctl.engine.streams import RequestStream


@dataclass
class TextChunks:
    """``async for text in chunks``: non-empty text pieces; then ``finish`` and ``token_ids``."""

    stream: RequestStream
    every: int = 1
    token_ids: list[int] = field(default_factory=list)
    text: str = ""  # everything yielded so far

    @property
    def finish(self) -> FinishEvent | None:
        return self.stream.finish

    async def __aiter__(self) -> AsyncIterator[str]:
        pending: list[str] = []
        async for event in self.stream:
            pending.append(event.text)
            if isinstance(event, TokenEvent):
                self.token_ids.extend(event.token_ids)
                if len(pending) < self.every:
                    continue
            if piece := self._take(pending):
                yield piece
            pending = []

    def _take(self, pending: list[str]) -> str:
        piece = "".join(pending)
        self.text += piece
        return piece
