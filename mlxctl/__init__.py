"""mlxctl: a terminal-first toolkit for running models locally on MLX."""

__version__ = "0.1.0"
