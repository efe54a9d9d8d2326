"""GET /openapi.json: an OpenAPI 3.1 document of the routes actually served."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.server.openapi import request_model


def test_document_lists_the_served_routes(base_url):
    doc = httpx.get(f"{base_url}/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/health", "/v1/models", "/v1/status", "/metrics", "/tokenize", "/detokenize"):
        assert path in doc["paths"], path
    body = doc["paths"]["/tokenize"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/TokenizeRequest"}
    assert "prompt" in doc["components"]["schemas"]["TokenizeRequest"]["properties"]


def test_document_is_valid_openapi(base_url):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(httpx.get(f"{base_url}/openapi.json").json())


def test_missing_protocol_modules_fall_back():
    assert request_model("/not/a/protocol") is None
