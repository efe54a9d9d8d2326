"""Man page and shell completions generated from mlxctl's click command tree."""
