"""The official OpenAI SDK against the emulator, over loopback: Responses (streamed,
unary, background + resume) and Chat Completions, for OpenAI and xAI."""

from __future__ import annotations

import json
from collections.abc import Callable

import openai
import pytest

from polystream.server import ServerThread
from tests.server.support import WEATHER, require, track

PREFIXES = {"openai": "/openai/v1", "xai": "/xai/v1"}
MODELS = {"openai": "gpt-5.4-mini", "xai": "grok-4.3"}


def client(server: ServerThread, provider: str = "openai", **options: object) -> openai.OpenAI:
    return track(
        openai.OpenAI(
            api_key="test",
            base_url=server.base_url + PREFIXES[provider],
            **options,  # type: ignore[arg-type]
        )
    )


@pytest.mark.parametrize("provider", ["openai", "xai"])
def test_responses_default_reply_contains_the_user_message(
    server: ServerThread, provider: str
) -> None:
    require(f"{provider}_responses")
    sdk = client(server, provider)
    response = sdk.responses.create(model=MODELS[provider], input="Say «héllo» please")
    assert response.status == "completed"
    assert "Say «héllo» please" in response.output_text
    assert response.model == MODELS[provider]
    streamed = sdk.responses.create(model=MODELS[provider], input="Say hi", stream=True)
    types = [event.type for event in streamed]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    assert "response.output_text.delta" in types


@pytest.mark.parametrize("provider", ["openai", "xai"])
def test_responses_stream_reasoning_and_tool_call(
    serve: Callable[..., ServerThread], provider: str
) -> None:
    require(f"{provider}_responses")
    server = serve([WEATHER])
    sdk = client(server, provider)
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    with sdk.responses.stream(
        model=MODELS[provider],
        input="What is the weather?",
        tools=tools,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_response()
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "message", "function_call"]
    call = final.output[2]
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert call.call_id == "call_w1"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert final.output_text == "Let me check."
    reasoning = final.output[0]
    assert reasoning.type == "reasoning"
    assert [part.text for part in reasoning.content or []] == [
        "The user wants the weather. Call the tool."
    ]
    # The unary answer is the same reply, rebuilt.
    unary = sdk.responses.create(model=MODELS[provider], input="What is the weather?")
    assert [item.type for item in unary.output] == kinds
    assert unary.usage is not None and unary.usage.total_tokens > 0


def test_responses_background_retrieve_and_resume(serve: Callable[..., ServerThread]) -> None:
    require("openai_responses")
    server = serve([{**WEATHER, "faults": {"drop_at_event": 5}}])
    sdk = client(server, max_retries=0)
    seen = []
    with pytest.raises(openai.APIConnectionError):  # the dropped connection
        for event in sdk.responses.create(
            model="gpt-5.4-mini", input="weather?", background=True, stream=True
        ):
            seen.append(event)
    assert len(seen) == 5
    response_id = seen[0].response.id  # type: ignore[union-attr]
    last = seen[-1].sequence_number
    rest = list(sdk.responses.retrieve(response_id, stream=True, starting_after=last))
    assert [e.sequence_number for e in rest] == list(range(last + 1, last + 1 + len(rest)))
    assert rest[-1].type == "response.completed"
    final = sdk.responses.retrieve(response_id)
    assert final.status == "completed"
    assert final.output_text == "Let me check."
    # background without stream: queued at once, complete when fetched.
    queued = sdk.responses.create(model="gpt-5.4-mini", input="weather?", background=True)
    assert queued.status == "queued"
    assert sdk.responses.retrieve(queued.id).status == "completed"
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve("resp_nope")


@pytest.mark.parametrize("provider", ["openai", "xai"])
def test_chat_usage_chunk_only_when_asked(server: ServerThread, provider: str) -> None:
    require(f"{provider}_chat")
    sdk = client(server, provider)
    messages = [{"role": "user", "content": "Tell me a story"}]
    plain = list(
        sdk.chat.completions.create(
            model=MODELS[provider],
            messages=messages,
            stream=True,  # type: ignore[arg-type]
        )
    )
    assert all(chunk.usage is None for chunk in plain)
    text = "".join(c.choices[0].delta.content or "" for c in plain if c.choices)
    assert "Tell me a story" in text
    counted = list(
        sdk.chat.completions.create(
            model=MODELS[provider],
            messages=messages,
            stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )
    )
    assert counted[-1].choices == []
    assert counted[-1].usage is not None and counted[-1].usage.total_tokens > 0
    assert all(chunk.usage is None for chunk in counted[:-1])
    unary = sdk.chat.completions.create(model=MODELS[provider], messages=messages)  # type: ignore[arg-type]
    assert unary.choices[0].message.content == text
    assert unary.usage is not None


def test_chat_tool_call_stream_and_unary(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve([WEATHER])
    sdk = client(server)
    messages = [{"role": "user", "content": "weather in Paris?"}]
    with sdk.chat.completions.stream(model="gpt-5.4-mini", messages=messages) as stream:  # type: ignore[arg-type]
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    unary = sdk.chat.completions.create(model="gpt-5.4-mini", messages=messages)  # type: ignore[arg-type]
    assert unary.choices[0].finish_reason == "tool_calls"


def test_rate_limit_with_retry_after(serve: Callable[..., ServerThread]) -> None:
    require("openai_responses")
    server = serve([{"faults": {"http_error": {"status": 429, "retry_after": 7}}}])
    sdk = client(server, max_retries=0)
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.responses.create(model="gpt-5.4-mini", input="hi")
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "rate_limit_exceeded"  # SDK unwraps "error"


def test_rate_limit_then_success_retried_by_the_sdk(serve: Callable[..., ServerThread]) -> None:
    require("openai_responses")
    server = serve([{"faults": {"http_error": {"status": 503, "retry_after": 0.05, "times": 1}}}])
    sdk = client(server, max_retries=2)
    response = sdk.responses.create(model="gpt-5.4-mini", input="again")
    assert response.status == "completed"
    assert server.stats.requests == 2


@pytest.mark.parametrize("status", [500, 529])
def test_server_errors(serve: Callable[..., ServerThread], status: int) -> None:
    require("openai_chat")
    server = serve([{"faults": {"http_error": {"status": status}}}])
    with pytest.raises(openai.InternalServerError) as caught:
        client(server, max_retries=0).chat.completions.create(
            model="gpt-5.4-mini", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == status


def test_in_band_error_after_n_events(serve: Callable[..., ServerThread]) -> None:
    require("openai_responses")
    server = serve([{"faults": {"error": {"after": 4, "kind": "overloaded"}}}])
    sdk = client(server, max_retries=0)
    # Responses reports a failure after HTTP 200 as a response.failed event, which the
    # SDK yields (it raises only for a bare "error" event).
    events = list(sdk.responses.create(model="gpt-5.4-mini", input="hello", stream=True))
    types = [event.type for event in events]
    assert types[-1] == "response.failed"
    assert "response.completed" not in types
    assert "response.output_text.delta" not in types  # failed before any text
    failed = events[-1].response  # type: ignore[union-attr]
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.message == "Overloaded"


def test_dropped_connection(serve: Callable[..., ServerThread]) -> None:
    require("openai_chat")
    server = serve([{"match": {"contains": "xxx"}, "faults": {"drop_at_byte": 300}}])
    sdk = client(server, max_retries=0)
    with pytest.raises(openai.APIConnectionError):
        list(
            sdk.chat.completions.create(
                model="gpt-5.4-mini", messages=[{"role": "user", "content": "x" * 50}], stream=True
            )
        )
    assert server.stats.dropped == 1
    # The server keeps serving.
    ok = sdk.chat.completions.create(
        model="gpt-5.4-mini", messages=[{"role": "user", "content": "y"}]
    )
    assert ok.choices[0].message.content
