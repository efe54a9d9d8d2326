"""ServerState: what one running app tracks beyond its settings (draining, in-flight work)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from mlxctl.engine.streams import RequestStream


@dataclass
class ServerState:
    """Per-app mutable state; lives under ``app[STATE]``, never at module level."""

    metrics: Any = None  # server.metrics.Metrics
    started: float = field(default_factory=time.time)
    draining: bool = False
    in_flight: int = 0
    streams: set[RequestStream] = field(default_factory=set)  # generations still open
    buckets: dict[str, Any] = field(default_factory=dict)  # rate limit: client -> TokenBucket
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    formats: Any = None  # {id(tokenizer): (tokenizer, api.chat_plan.ModelFormats)} per served model
    warm: Any = None  # server.warm.WarmProgress while or after --warm-prompts runs
    background: set[asyncio.Task] = field(default_factory=set)  # tasks the app owns (warm-up)
    mcp: Any = None  # server.mcp_service.McpService with --mcp-config

    def __post_init__(self) -> None:
        self.idle.set()

    @property
    def uptime_s(self) -> float:
        return time.time() - self.started

    def enter(self) -> None:
        self.in_flight += 1
        self.idle.clear()

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()
