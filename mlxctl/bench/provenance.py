"""Where a report came from: tool and Python versions, the machine, the command, the time."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from typing import Any

from mlxctl import __version__


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The facts a reader needs to reproduce or compare a benchmark."""
    return {
        "mlxctl_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "command": command_line(argv),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed, shell-quoted, starting with ``mlxctl``."""
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["mlxctl", *args])
