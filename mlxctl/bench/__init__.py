"""bench-serve: benchmark any OpenAI-compatible server over HTTP.

An HTTP client only: nothing here imports ``mlxctl.engine`` or ``mlx``. The flow is
config -> plan (shapes x URLs x repeats) -> runner (one run) -> metrics -> report.
"""
