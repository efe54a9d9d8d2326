"""Use a fast BLAS for MLX's CPU backend on Linux.

The Linux ``mlx[cpu]`` wheel links a reference BLAS; preloading OpenBLAS (Debian's
``libopenblas0-pthread``) makes float32 matmuls several times faster. A preload only works
at process start, so a command that is about to import MLX re-executes itself once with
``LD_PRELOAD`` set. ``MLXCTL_BLAS=off`` turns this off; nothing happens on macOS, when MLX is
already imported, or when no OpenBLAS is installed.
"""

from __future__ import annotations

import os
import sys

CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",
)
MARK = "MLXCTL_BLAS_PRELOADED"


def find_openblas() -> str | None:
    return next((p for p in CANDIDATES if os.path.exists(p)), None)


def wanted() -> bool:
    return (sys.platform == "linux" and os.environ.get("MLXCTL_BLAS", "auto") != "off"
            and MARK not in os.environ and "mlx.core" not in sys.modules and _from_entry_point())


def _from_entry_point() -> bool:
    """Only the real CLI process re-executes (never a test runner calling the app)."""
    if os.path.basename(sys.argv[0]) == "mlxctl":  # the console script
        return True
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)  # python -m mlxctl (not python -m pytest)
    return spec is not None and spec.name == "mlxctl.__main__"


def ensure_fast_blas() -> None:
    """Re-exec this process with OpenBLAS preloaded, when that helps and is possible."""
    lib = find_openblas() if wanted() else None
    if lib is None or lib in os.environ.get("LD_PRELOAD", ""):
        return
    env = dict(os.environ, **{MARK: "1"})
    env["LD_PRELOAD"] = ":".join(p for p in (lib, os.environ.get("LD_PRELOAD")) if p)
    sys.stdout.flush(), sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "mlxctl", *sys.argv[1:]], env)
