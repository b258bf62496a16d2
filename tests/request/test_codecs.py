"""Request codecs: every dialect's native body <-> the unified Request."""

from __future__ import annotations

import pytest

from polystream.request import (
    ImagePart,
    Message,
    ReasoningConfig,
    ReasoningPart,
    Request,
    RequestError,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    auth_headers,
    build_request,
    error_body,
    error_from_body,
    parse_request,
)

WEATHER = Tool(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _turns(signature_kind: str) -> Request:
    reasoning = {
        "anthropic": ReasoningPart(text="think", signature="sig-abc"),
        "gemini": ReasoningPart(text="think", signature="c2lnLWdlbQ=="),
        "openai": ReasoningPart(text="think", id="rs_1", encrypted_content="enc-xyz"),
    }[signature_kind]
    call = ToolCallPart(id="call_1", name="get_weather", arguments={"city": "Paris"})
    if signature_kind == "gemini":
        call = ToolCallPart(
            id="call_1", name="get_weather", arguments={"city": "Paris"}, signature="c2lnLWNhbGw="
        )
    return Request(
        model="m",
        system="Be brief.",
        messages=[
            Message(role="user", content=[TextPart(text="Weather in Paris?")]),
            Message(role="assistant", content=[reasoning, call]),
            Message(
                role="tool",
                content=[ToolResultPart(call_id="call_1", name="get_weather", content="sunny")],
            ),
        ],
        tools=[WEATHER],
        max_tokens=256,
        temperature=0.5,
        stream=True,
    )


@pytest.mark.parametrize(
    ("dialect", "kind"),
    [
        ("openai_responses", "openai"),
        ("xai_responses", "openai"),
        ("anthropic_messages", "anthropic"),
        ("xai_messages", "anthropic"),
        ("gemini_generate", "gemini"),
        ("gemini_interactions", "gemini"),
    ],
)
def test_round_trip_keeps_history_and_opaque_state(dialect: str, kind: str) -> None:
    request = _turns(kind)
    native = build_request(dialect, request)
    back = parse_request(dialect, native.body, model="m")
    assert back.model == "m"
    assert back.system == "Be brief."
    assert back.tools[0].name == "get_weather"
    assert back.tools[0].parameters == WEATHER.parameters
    assert back.max_tokens == 256
    assert back.temperature == 0.5
    assert [m.role for m in back.messages] == ["user", "assistant", "tool"]
    assistant = back.messages[1].content
    reasoning = next(p for p in assistant if isinstance(p, ReasoningPart))
    call = next(p for p in assistant if isinstance(p, ToolCallPart))
    assert call.name == "get_weather" and call.arguments == {"city": "Paris"}
    assert call.id == "call_1"
    if kind == "openai":
        assert reasoning.encrypted_content == "enc-xyz" and reasoning.id == "rs_1"
    elif kind == "anthropic":
        assert reasoning.signature == "sig-abc" and reasoning.text == "think"
    else:
        assert reasoning.signature == "c2lnLWdlbQ=="
        if dialect == "gemini_generate":
            assert call.signature == "c2lnLWNhbGw="
    result = back.messages[2].content[0]
    assert isinstance(result, ToolResultPart) and result.call_id == "call_1"
    assert "sunny" in str(result.content)


def test_chat_round_trip() -> None:
    request = _turns("openai")
    native = build_request("openai_chat", request)
    assert native.path == "/chat/completions"
    assert native.body["stream_options"] == {"include_usage": True}
    assert native.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assistant = native.body["messages"][2]
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert assistant["reasoning_content"] == "think"
    assert native.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny",
    }
    back = parse_request("openai_chat", native.body)
    assert back.include_usage is True
    assert isinstance(back.messages[1].content[0], ReasoningPart)


def test_exact_anthropic_body() -> None:
    request = Request(
        model="claude-x",
        max_tokens=100,
        stop=["END"],
        tool_choice="get_weather",
        messages=[
            Message(
                role="user",
                content=[TextPart(text="hi"), ImagePart(data="AAAA", mime_type="image/png")],
            )
        ],
        reasoning=ReasoningConfig(budget_tokens=2048),
        tools=[WEATHER],
    )
    native = build_request("anthropic_messages", request)
    assert native.path == "/v1/messages"
    assert native.body == {
        "model": "claude-x",
        "max_tokens": 3072,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                ],
            }
        ],
        "stream": True,
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "input_schema": WEATHER.parameters,
            }
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stop_sequences": ["END"],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }


def test_gemini_path_and_query() -> None:
    request = Request(
        model="gemini-3", messages=[Message(role="user", content=[TextPart(text="x")])]
    )
    assert (
        build_request("gemini_generate", request).path
        == "/v1beta/models/gemini-3:streamGenerateContent"
    )
    assert build_request("gemini_generate", request).query == {"alt": "sse"}
    assert build_request("gemini_generate", request, framing="json_array").query == {}
    unary = Request(model="gemini-3", stream=False)
    assert build_request("gemini_generate", unary).path.endswith(":generateContent")


def test_responses_string_input_and_last_user_text() -> None:
    request = parse_request(
        "openai_responses", {"model": "gpt", "input": "Reply with OK.", "stream": True}
    )
    assert request.last_user_text() == "Reply with OK."
    assert request.stream is True


def test_responses_refuses_stop_sequences() -> None:
    request = Request(model="m", stop=["x"])
    with pytest.raises(RequestError) as info:
        build_request("openai_responses", request)
    assert info.value.param == "stop"


@pytest.mark.parametrize(
    ("dialect", "body", "param"),
    [
        ("openai_chat", {"model": "m"}, "messages"),
        (
            "openai_chat",
            {"model": "m", "messages": [{"role": "wizard", "content": "x"}]},
            "messages[0].role",
        ),
        ("openai_responses", {"model": "m"}, "input"),
        ("anthropic_messages", {"model": "m", "messages": []}, "max_tokens"),
        ("anthropic_messages", {"messages": [], "max_tokens": 1}, "model"),
        ("gemini_generate", {"contents": "nope"}, "contents"),
        ("openai_chat", {"model": "m", "messages": [], "max_tokens": -1}, "max_tokens"),
        (
            "openai_chat",
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{bad"}}],
                    }
                ],
            },
            "messages[0].tool_calls[0].function.arguments",
        ),
    ],
)
def test_malformed_bodies_name_the_parameter(dialect: str, body: dict, param: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(dialect, body, model="m" if dialect == "gemini_generate" else None)
    assert info.value.param == param


def test_non_object_body() -> None:
    with pytest.raises(RequestError):
        parse_request("openai_chat", [1, 2])


def test_no_argument_tool_call_arguments_are_empty_object() -> None:
    body = {
        "model": "m",
        "input": [{"type": "function_call", "call_id": "c", "name": "ping", "arguments": ""}],
    }
    request = parse_request("openai_responses", body)
    call = request.messages[0].content[0]
    assert isinstance(call, ToolCallPart) and call.arguments == {}


def test_auth_headers() -> None:
    assert auth_headers("openai_chat", "k") == {"authorization": "Bearer k"}
    assert auth_headers("xai_messages", "k") == {"authorization": "Bearer k"}
    assert auth_headers("anthropic_messages", "k") == {
        "x-api-key": "k",
        "anthropic-version": "2023-06-01",
    }
    assert auth_headers("gemini_interactions", "k") == {"x-goog-api-key": "k"}


def test_error_bodies_in_each_provider_shape() -> None:
    assert error_body("openai_chat", 400, "bad", param="model") == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": "model", "code": None}
    }
    assert error_body("anthropic_messages", 529, "busy") == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    assert error_body("gemini_generate", 429, "slow down") == {
        "error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
    }


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable", "code"),
    [
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "overloaded",
            True,
            "overloaded_error",
        ),
        (
            429,
            {"error": {"message": "m", "type": "requests", "code": "rate_limit_exceeded"}},
            "rate_limit",
            True,
            "rate_limit_exceeded",
        ),
        (
            400,
            {"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}},
            "invalid_request",
            False,
            "INVALID_ARGUMENT",
        ),
        (503, "upstream connect error", "overloaded", True, None),
        (
            401,
            {
                "error": {
                    "message": "no key",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
            "authentication",
            False,
            "invalid_api_key",
        ),
    ],
)
def test_error_from_body(
    status: int, body: object, kind: str, retryable: bool, code: str | None
) -> None:
    info = error_from_body(status, body)
    assert (info.kind, info.retryable, info.code, info.http_status) == (
        kind,
        retryable,
        code,
        status,
    )
