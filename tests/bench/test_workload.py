"""Workload contract files and the checks on replies."""

from __future__ import annotations

import json
import re

import pytest

from mlxctl.bench.checks import Checks, evaluate
from mlxctl.bench.workload import load_workload
from mlxctl.errors import BadInputError, ModelNotFoundError
from tests.cli.helpers import REPO

PARIS = Checks(finish_reason=("stop",), require=(re.compile("(?i)paris"),), forbid=(re.compile("London"),), min_chars=5)


def test_a_good_reply_passes():
    assert evaluate(PARIS, "The capital is Paris.", "stop") == []


def test_each_broken_check_is_a_reason():
    assert evaluate(PARIS, "London", "length") == [
        "finish_reason 'length', expected stop",
        "missing /(?i)paris/",
        "forbidden /London/ matched",
    ]
    assert evaluate(PARIS, "Paris", "stop") == []
    assert evaluate(PARIS, "paris", None)[0] == "finish_reason None, expected stop"
    assert evaluate(Checks(min_chars=10), "short", "stop") == ["5 chars, expected at least 10"]


def test_empty_checks_pass_anything():
    assert evaluate(Checks(), "", None) == []


def test_shipped_smoke_workload_loads():
    cases = load_workload(REPO / "docs" / "workloads" / "smoke.yaml")
    capital = cases[0]
    assert capital.name == "capital-of-france"
    assert capital.max_tokens == 64 and capital.temperature == 0
    assert capital.checks.finish_reason == ("stop",)
    assert capital.checks.require[0].search("Paris")
    assert cases[1].prompt and cases[1].max_tokens == 32


def test_json_workload_as_a_bare_list(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps([{"prompt": "hi", "checks": {"require": "h.llo", "finish_reason": ["stop", "length"]}}]))
    (case,) = load_workload(path)
    assert case.name == "case-1" and case.prompt == "hi"
    assert case.checks.finish_reason == ("stop", "length")
    assert case.body("chat", "m")["messages"] == [{"role": "user", "content": "hi"}]
    assert "ignore_eos" not in case.body("chat", "m")


BAD = [
    ({"cases": []}, "non-empty 'cases'"),
    ({"cases": [{"prompt": "a", "colour": 1}]}, "unknown key 'colour'"),
    ({"cases": [{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}]}, "exactly one of"),
    ({"cases": [{"name": "x"}]}, "exactly one of"),
    ({"cases": [{"prompt": "a", "checks": {"require": "("}}]}, "bad regex"),
    ({"cases": [{"prompt": "a", "checks": {"must": 1}}]}, "unknown key 'must'"),
    ({"cases": [{"prompt": "a", "max_tokens": "many"}]}, "'max_tokens' must be"),
    ({"cases": [{"name": "a", "prompt": "x"}, {"name": "a", "prompt": "y"}]}, "two cases are named 'a'"),
    ({"cases": [{"messages": "hi"}]}, "'messages' must be a list"),
]


@pytest.mark.parametrize("document, message", BAD, ids=[m for _, m in BAD])
def test_mistakes_are_one_line_errors(tmp_path, document, message):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(document))
    with pytest.raises(BadInputError, match=re.escape(message)):
        load_workload(path)


def test_bad_yaml_and_missing_file(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("cases: [unclosed")
    with pytest.raises(BadInputError, match="not valid YAML"):
        load_workload(path)
    with pytest.raises(ModelNotFoundError, match="workload file not found"):
        load_workload(tmp_path / "nope.yaml")
