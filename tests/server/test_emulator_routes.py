"""The emulator's routes are the registry's: every dialect route is served, a known path
with a wrong method is a 405 in the provider's shape, anything else a 404."""

from __future__ import annotations

import httpx

from polystream.dialects import DIALECTS, PROVIDERS
from polystream.server import ENDPOINTS, ServerThread


def test_endpoints_list_every_registered_route() -> None:
    assert sorted(ENDPOINTS) == sorted(
        (route.method, PROVIDERS[spec.provider].prefix + route.path, name)
        for name, spec in DIALECTS.items()
        for route in spec.routes
    )


def test_the_index_lists_each_sdks_base_url(server: ServerThread) -> None:
    index = httpx.get(server.base_url + "/")
    assert index.status_code == 200
    assert index.json()["base_urls"] == {
        "openai": "/openai/v1",
        "anthropic": "/anthropic",
        "xai": "/xai/v1",
        "xai_messages": "/xai",
        "gemini": "/gemini",
    }


def test_any_wrong_method_on_a_known_path_is_a_405_in_the_providers_shape(
    server: ServerThread,
) -> None:
    response = httpx.request("TRACE", server.base_url + "/anthropic/v1/messages")
    assert response.status_code == 405
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": "Method TRACE not allowed for /anthropic/v1/messages.",
    }
    gemini = httpx.get(server.base_url + "/gemini/v1/models/gemini-x:generateContent")
    assert gemini.status_code == 405 and gemini.json()["error"]["status"] == "UNIMPLEMENTED"


def test_a_path_with_an_empty_segment_or_an_unknown_version_is_a_404(
    server: ServerThread,
) -> None:
    for path in ("/openai/v1/responses/", "/openai//v1/responses", "/gemini/v9/interactions"):
        response = httpx.post(server.base_url + path, json={})
        assert response.status_code == 404, path


def test_a_resume_cursor_is_read_by_its_dialects_parameter(server: ServerThread) -> None:
    bad = httpx.get(server.base_url + "/xai/v1/responses/resp_x?stream=true&starting_after=x")
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "starting_after"
    missing = httpx.get(server.base_url + "/gemini/v1beta/interactions/v1_x?last_event_id=e")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Interaction with id 'v1_x' not found."
