"""mlxctl's CLI with a follower grace far longer than any test waits.

Usage: python -m tests.distributed.long_grace ARGS (as ``python -m mlxctl ARGS``). A follower
that waited out its grace (instead of leaving at once when rank 0 is gone or stops it) would keep
the job alive past every test's backstop: the tests see a job that never ends, not one that ends
some seconds later, so they time nothing.
"""

from __future__ import annotations

from mlxctl.cli import tensor_parallel
from mlxctl.cli.app import main

tensor_parallel.FOLLOWER_GRACE_S = 3600.0

if __name__ == "__main__":
    main()
