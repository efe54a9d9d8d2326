import httpx


def test_health_and_models(base_url):
    assert httpx.get(f"{base_url}/health").json()["status"] == "ok"
    models = httpx.get(f"{base_url}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["smollm2-135m"]


def test_unknown_route_is_an_openai_shaped_404(base_url):
    r = httpx.get(f"{base_url}/v1/nothing")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error"
