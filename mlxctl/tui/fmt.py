"""Short human forms of sizes, durations and rates for the live views."""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def size(n: float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in UNITS:
        if abs(n) < 1024 or unit == UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} {UNITS[-1]}"  # pragma: no cover


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{s:02d}s"
    if minutes:
        return f"{minutes}m{s:02d}s"
    return f"{seconds:.1f}s"


def rate(value: float | None, unit: str = "tok/s") -> str:
    if value is None:
        return "-"
    text = f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return f"{text} {unit}" if unit else text


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def bar(part: float, whole: float, width: int = 20) -> str:
    """``[#####.....]`` for part/whole."""
    filled = round(width * min(1.0, part / whole)) if whole else 0
    return "█" * filled + "░" * (width - filled)
