"""Bad input gets the provider's own error shape (never a traceback), a client that
leaves mid-stream stops the delivery at once, and the server keeps serving others."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
import pytest

from polystream.scenario import MAX_BODY_SIZE
from polystream.server import ServerThread
from tests.server.support import require

OPENAI = "/openai/v1/chat/completions"
ANTHROPIC = "/anthropic/v1/messages"
GEMINI = "/gemini/v1beta/models/gemini-3.8-flash:generateContent"


def post(
    server: ServerThread, path: str, content: bytes, ctype: str = "application/json"
) -> httpx.Response:
    return httpx.post(server.base_url + path, content=content, headers={"content-type": ctype})


def openai_error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]  # type: ignore[no-any-return]


def test_garbage_bodies(server: ServerThread) -> None:
    require("openai_chat", "anthropic_messages", "gemini_generate")
    for garbage in (b"{not json", b"\xff\xfe\x00", b"[1, 2]", b"42", b""):
        response = post(server, OPENAI, garbage)
        assert response.status_code == 400
        assert openai_error(response)["type"] == "invalid_request_error"
        anthropic = post(server, ANTHROPIC, garbage)
        assert anthropic.status_code == 400
        assert anthropic.json()["type"] == "error"
        assert anthropic.json()["error"]["type"] == "invalid_request_error"
        gemini = post(server, GEMINI, garbage)
        assert gemini.status_code == 400
        assert gemini.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert gemini.json()["error"]["code"] == 400


def test_wrong_content_type_and_missing_fields(server: ServerThread) -> None:
    require("openai_chat", "anthropic_messages")
    wrong = post(server, OPENAI, b'{"model": "gpt-5"}', "text/plain")
    assert wrong.status_code == 400
    assert "Content-Type" in str(openai_error(wrong)["message"])
    missing = post(server, OPENAI, b'{"messages": [{"role": "user", "content": "x"}]}')
    assert missing.status_code == 400
    assert openai_error(missing) == {
        "message": "Missing required parameter: 'model'.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "missing_required_parameter",
    }
    no_max = post(
        server,
        ANTHROPIC,
        b'{"model": "claude-sonnet-5-5", "messages": [{"role":"user","content":"x"}]}',
    )
    assert no_max.status_code == 400
    assert no_max.json()["error"] == {
        "type": "invalid_request_error",
        "message": "max_tokens: Field required",
    }


def test_unknown_models_paths_and_methods(server: ServerThread) -> None:
    require("openai_chat", "anthropic_messages")
    model = post(
        server, OPENAI, b'{"model": "nonexistent", "messages": [{"role":"user","content":"x"}]}'
    )
    assert model.status_code == 404
    assert openai_error(model)["code"] == "model_not_found"
    anthropic_model = post(
        server,
        ANTHROPIC,
        b'{"model": "gpt-4", "max_tokens": 5, "messages": [{"role":"user","content":"x"}]}',
    )
    assert anthropic_model.status_code == 404
    assert anthropic_model.json()["error"]["type"] == "not_found_error"
    path = httpx.post(server.base_url + "/openai/v1/nothing", json={})
    assert path.status_code == 404 and openai_error(path)["type"] == "invalid_request_error"
    gemini_path = httpx.post(server.base_url + "/gemini/v1beta/models/x:explode", json={})
    assert gemini_path.status_code == 404
    assert gemini_path.json()["error"]["status"] == "NOT_FOUND"
    elsewhere = httpx.get(server.base_url + "/nowhere")
    assert elsewhere.status_code == 404 and "error" in elsewhere.json()
    method = httpx.get(server.base_url + OPENAI)
    assert method.status_code == 405 and openai_error(method)["type"] == "invalid_request_error"
    index = httpx.get(server.base_url + "/")
    assert index.status_code == 200 and index.json()["base_urls"]["openai"] == "/openai/v1"


def test_request_too_large(server: ServerThread) -> None:
    require("anthropic_messages")
    big = b'{"model": "claude-sonnet-5-5", "pad": "' + b"x" * MAX_BODY_SIZE + b'"}'
    response = post(server, ANTHROPIC, big)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"
    # Still serving.
    ok = httpx.post(
        server.base_url + ANTHROPIC,
        json={
            "model": "claude-sonnet-5-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert ok.status_code == 200


def test_client_disconnect_stops_the_stream(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve([{"reply": {"text": " ".join(["word"] * 40)}, "timing": {"delay": 0.1}}])
    body = {"model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.stream("POST", server.base_url + OPENAI, json=body) as response:
        for count, _ in enumerate(response.iter_raw(), 1):
            if count == 3:
                break
    for _ in range(100):  # the server notices at once; allow for a loaded machine
        if server.stats.cancelled:
            break
        time.sleep(0.02)
    assert server.stats.cancelled == 1
    sent = server.stats.chunks
    time.sleep(0.3)
    assert server.stats.chunks == sent  # nothing more was produced
    assert sent < 10
    assert server.stats.completed == 0


def test_other_clients_are_served_during_a_slow_stream(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve(
        [{"match": {"contains": "slow"}, "reply": {"text": "a b c"}, "timing": {"delay": 0.25}}]
    )
    slow_body = {
        "model": "gpt-5.4-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "slow please"}],
    }
    done: list[float] = []

    def slow() -> None:
        httpx.post(server.base_url + OPENAI, json=slow_body, timeout=30)
        done.append(time.perf_counter())

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.2)
    quick = httpx.post(
        server.base_url + OPENAI,
        json={"model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "quick"}]},
    )
    answered = time.perf_counter()
    assert quick.status_code == 200
    assert "quick" in quick.json()["choices"][0]["message"]["content"]
    thread.join()
    assert done and answered < done[0]


@pytest.mark.parametrize("query", ["starting_after=abc", "stream=true&starting_after=-x"])
def test_bad_resume_cursor(server: ServerThread, query: str) -> None:
    response = httpx.get(f"{server.base_url}/openai/v1/responses/resp_x?{query}")
    assert response.status_code == 400
    assert openai_error(response)["param"] == "starting_after"


def test_internal_failure_is_a_provider_shaped_500(serve: Callable[..., ServerThread]) -> None:
    require("anthropic_messages")
    server = serve()
    emulator = server.app.state.emulator
    original = emulator.answer

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("boom")

    emulator.answer = broken
    failed = httpx.post(
        server.base_url + ANTHROPIC,
        json={
            "model": "claude-sonnet-5-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert failed.status_code == 500
    assert failed.json()["error"]["type"] == "api_error"
    assert "Traceback" not in failed.text and "boom" not in failed.text
    emulator.answer = original
    again = httpx.post(
        server.base_url + ANTHROPIC,
        json={
            "model": "claude-sonnet-5-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert again.status_code == 200


@pytest.mark.parametrize("method", ["PUT", "DELETE", "OPTIONS", "PATCH"])
def test_other_methods_are_405_in_the_provider_shape(server: ServerThread, method: str) -> None:
    response = httpx.request(method, server.base_url + "/gemini/v1beta/interactions")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == 405
