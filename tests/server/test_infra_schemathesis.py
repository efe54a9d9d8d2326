"""A bounded schemathesis run against /openapi.json: the cheap endpoints never answer 5xx.

Generation endpoints are left out (each example would run the model); their validation is
covered by the protocol tests.
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

CHEAP = r"^/(tokenize|detokenize|health|v1/models|v1/status|openapi\.json)$"


@pytest.fixture
def api_schema(base_url):
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema").include(path_regex=CHEAP)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case):
    case.call_and_validate(checks=[not_a_server_error])
