"""Reading /metrics text and the fixture files of tests/server/metrics_fixtures in tests."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

FIXTURES = Path(__file__).parent / "metrics_fixtures"


def fixture_rows(name: str) -> list[list[str]]:
    """A fixture's lines, split on spaces, less its comments."""
    lines = (FIXTURES / name).read_text().splitlines()
    return [line.split() for line in lines if line.strip() and not line.startswith("#")]


def families(text: str) -> dict:
    """Family name -> prometheus_client Metric."""
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for s in samples(text) if s.name == name and labels.items() <= s.labels.items())


def scrape(url: str) -> str:
    r = httpx.get(f"{url}/metrics", timeout=30)
    assert r.status_code == 200, r.text
    return r.text


def without_created(text: str) -> str:
    """The exposition text with the _created timestamps (the time a series began) blanked."""
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", text)
