"""Where `mlxctl serve` logs go: stderr, as human lines or JSON lines (--log-format)."""

from __future__ import annotations

import json
import logging
import sys
from typing import TextIO

LOGGERS = ("mlxctl.access", "mlxctl.server")
FORMATS = ("human", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and any ``http`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                 "message": record.getMessage(), **getattr(record, "http", {})}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    return logging.Formatter("%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")


def configure(log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """Send the server's loggers to ``stream`` (stderr) in ``log_format``; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(log_format))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return handler
