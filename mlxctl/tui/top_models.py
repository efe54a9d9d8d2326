"""The models panel of `mlxctl top`: every model the daemon serves and its residency.

The primary model (``serve -m``'s first, always loaded, never unloaded) comes from the top of
``/v1/status``; the others from its ``models`` list (the resident pool: lazy loads, leases,
keep-alive; see ``mlxctl/server/residency.py``).
"""

from __future__ import annotations

from rich.text import Text

from mlxctl.tui import fmt

MODEL_COLUMNS = (("id", "model"), ("state", "state"), ("in_use", "in use"), ("idle", "idle"),
                 ("keep_alive", "keep-alive"), ("weights", "weights"), ("loads", "loads"), ("pinned", "pinned"))

_STATE_STYLES = {"ready": "green", "loading": "yellow", "draining": "yellow", "unloaded": "dim", "failed": "red"}


def model_rows(status: dict) -> dict[str, tuple]:
    """Row key -> cells (one per column of ``MODEL_COLUMNS``), the primary model first."""
    engine = status.get("engine") or {}
    primary = str(status.get("model", "?"))
    state = "draining" if status.get("draining") else "ready" if status.get("loaded") else "loading"
    # in use: the requests its engine holds; for a pool model, the requests leasing it
    requests = int(engine.get("num_running", 0) or 0) + int(engine.get("num_waiting", 0) or 0)
    rows = {primary: (primary, _state(state), f"{requests:,}", "-", "never", "-", "-", "primary")}
    for m in status.get("models") or []:
        name = str(m.get("id", "?"))
        if name in rows:  # the primary listed in the pool too: keep the pool's figures
            name = f"{name} (pool)"
        in_use = int(m.get("in_use", 0) or 0)
        keep = m.get("keep_alive_s")
        weights = m.get("weights_bytes") or 0
        rows[name] = (
            name,
            _state(str(m.get("state", "?")), m.get("error")),
            f"{in_use:,}",
            fmt.duration(m.get("idle_s")) if not in_use else "-",
            "never" if keep is None else fmt.duration(keep),
            fmt.size(weights) if weights else "-",
            f"{m.get('loads', 0):,}",
            "yes" if m.get("pinned") else "",
        )
    return rows


def models_title(status: dict) -> str:
    pool = status.get("models") or []
    ready = int(bool(status.get("loaded"))) + sum(m.get("state") == "ready" for m in pool)
    in_use = sum(int(m.get("in_use", 0) or 0) for m in pool)
    return f"Models: {1 + len(pool)} served · {ready} loaded · {in_use} leased"


def _state(state: str, error: str | None = None) -> Text:
    text = Text(state, style=_STATE_STYLES.get(state, ""))
    if error:
        text.append(f": {error}"[:60], style="red")
    return text
