"""Request codecs: every dialect's native body <-> the unified Request."""

from __future__ import annotations

import contextlib
import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from polystream.request.codecs import extra_fields, pass_through_body, sent_extra

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
        # Values of the wrong type where a list, an object or a string is read.
        ("openai_chat", {"model": "m", "messages": [], "tools": 1}, "tools"),
        (
            "openai_chat",
            {"model": "m", "messages": [{"role": "assistant", "tool_calls": True}]},
            "messages[0].tool_calls",
        ),
        ("openai_responses", {"model": "m", "input": "x", "tools": 1.5}, "tools"),
        (
            "openai_responses",
            {"model": "m", "input": [{"type": "reasoning", "summary": 5}]},
            "input[0].summary",
        ),
        (
            "openai_responses",
            {"model": "m", "input": [{"type": "reasoning", "encrypted_content": 5}]},
            "messages[0].content[0].encrypted_content",
        ),
        (
            "openai_responses",
            {"model": "m", "input": "x", "reasoning": {"effort": {}}},
            "reasoning.effort",
        ),
        (
            "openai_responses",
            {"model": "m", "input": [{"type": "function_call_output", "call_id": ["c"]}]},
            "messages[0].content[0].call_id",
        ),
        (
            "anthropic_messages",
            {"model": "m", "max_tokens": 1, "messages": [], "tools": 2},
            "tools",
        ),
        (
            "anthropic_messages",
            {
                "model": "m",
                "max_tokens": 1,
                "messages": [{"role": "user", "content": [{"type": "thinking", "thinking": True}]}],
            },
            "messages[0].content[0].text",
        ),
        (
            "anthropic_messages",
            {
                "model": "m",
                "max_tokens": 1,
                "messages": [],
                "thinking": {"type": "enabled", "budget_tokens": {}},
            },
            "reasoning.budget_tokens",
        ),
        (
            "gemini_generate",
            {"contents": [], "tools": [{"functionDeclarations": 3}]},
            "tools[0].functionDeclarations",
        ),
        (
            "gemini_generate",
            {"contents": [], "generationConfig": {"thinkingConfig": "x"}},
            "generationConfig.thinkingConfig",
        ),
        (
            "gemini_interactions",
            {"model": "m", "input": [{"type": "thought", "summary": {"text": "x"}}]},
            "input[0].summary",
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


BODIES = {
    "openai_responses": {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "t"}]},
        ],
        "instructions": "sys",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "reasoning": {"effort": "low"},
        "max_output_tokens": 10,
    },
    "openai_chat": {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "stop": ["x"],
    },
    "anthropic_messages": {
        "model": "claude",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "s"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    },
    "gemini_generate": {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        ],
        "systemInstruction": {"parts": [{"text": "s"}]},
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}],
        "generationConfig": {"maxOutputTokens": 5, "thinkingConfig": {"thinkingBudget": 100}},
    },
    "gemini_interactions": {
        "model": "gemini",
        "input": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "model",
                "content": [{"type": "function_call", "id": "c", "name": "f", "arguments": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "function_result", "call_id": "c", "result": "ok"}],
            },
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
    },
}
ODD_VALUES = [None, 0, -1, 1.5, "", "x", [], {}, [None], {"type": None}, True, {"text": 1}, 10**30]


def _mutated(value: object, rng: random.Random) -> object:
    """``value`` with one nested value replaced by a value of another type, or removed."""
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.4:
            out[key] = rng.choice(ODD_VALUES)
        elif roll < 0.55:
            del out[key]
        else:
            out[key] = _mutated(value[key], rng)
        return out
    if isinstance(value, list) and value:
        at = rng.randrange(len(value))
        items = list(value)
        items[at] = rng.choice(ODD_VALUES) if rng.random() < 0.4 else _mutated(value[at], rng)
        return items
    return rng.choice(ODD_VALUES)


@settings(max_examples=300, deadline=None)
@given(rng=st.randoms(use_true_random=False), dialect=st.sampled_from(sorted(BODIES)))
def test_any_malformed_body_is_a_request_error(rng: random.Random, dialect: str) -> None:
    # Whatever a client sends, parsing it and building every dialect's body from it
    # either works or raises RequestError: never a TypeError or an AttributeError.
    body: object = BODIES[dialect]
    for _ in range(rng.randint(1, 4)):
        body = _mutated(body, rng)
    try:
        request = parse_request(dialect, body, model="m" if dialect == "gemini_generate" else None)
    except RequestError:
        return
    for target in sorted(BODIES):
        with contextlib.suppress(RequestError):
            build_request(target, request)


# -- fields the unified request does not name ------------------------------------------
# (Request bodies written from each provider's API reference: fields the unified model
# has no place for, beside ones it has.)

_UNNAMED = {
    "openai_chat": (
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "temperature": 0.2,
            "response_format": {"type": "json_object"},
            "seed": 7,
            "user": "u-1",
            "logit_bias": None,
        },
        {"response_format": {"type": "json_object"}, "seed": 7, "user": "u-1"},
    ),
    "openai_responses": (
        {
            "model": "m",
            "input": "hi",
            "stream": True,
            "text": {"format": {"type": "json_object"}},
            "store": False,
            "include": ["message.output_text.logprobs"],
        },
        {
            "text": {"format": {"type": "json_object"}},
            "store": False,
            "include": ["message.output_text.logprobs"],
        },
    ),
    "anthropic_messages": (
        {
            "model": "m",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
            "top_k": 5,
            "metadata": {"user_id": "u-1"},
        },
        {"top_k": 5, "metadata": {"user_id": "u-1"}},
    ),
    "gemini_generate": (
        {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {
                "temperature": 0.2,
                "responseMimeType": "application/json",
                "topK": 5,
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
        {
            "generationConfig": {"responseMimeType": "application/json", "topK": 5},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    ),
    "gemini_interactions": (
        {
            "model": "m",
            "input": "hi",
            "stream": True,
            "generation_config": {"temperature": 0.2, "seed": 7},
            "previous_interaction_id": "int_1",
        },
        {"generation_config": {"seed": 7}, "previous_interaction_id": "int_1"},
    ),
}


@pytest.mark.parametrize("dialect", sorted(_UNNAMED))
def test_fields_the_model_does_not_name_go_only_to_their_own_dialect(dialect: str) -> None:
    body, unnamed = _UNNAMED[dialect]
    request = parse_request(dialect, body, model="m")
    assert request.extra == unnamed
    assert request.origin == dialect
    assert request.temperature in (0.2, None)
    native = build_request(dialect, request).body
    # The same dialect: each such field as it came, beside what the model states.
    for name, value in unnamed.items():
        if isinstance(value, dict) and name in ("generationConfig", "generation_config"):
            assert native[name] == {**value, "temperature": 0.2}
        else:
            assert native[name] == value
    assert parse_request(dialect, native, model="m").extra == unnamed
    # Any other dialect: none of them (nothing there to take them).
    for other in sorted(set(_UNNAMED) - {dialect}):
        with contextlib.suppress(RequestError):
            elsewhere = build_request(other, request).body
            for name in unnamed:
                if name in ("generationConfig", "generation_config"):
                    assert set(elsewhere.get(name, {})) <= {"temperature", "maxOutputTokens"}
                elif name != "include":
                    assert name not in elsewhere, (other, name)


def test_unnamed_fields_are_listed_by_name() -> None:
    body, _ = _UNNAMED["gemini_generate"]
    request = parse_request("gemini_generate", body, model="m")
    assert extra_fields(request) == [
        "generationConfig.responseMimeType",
        "generationConfig.topK",
        "safetySettings",
    ]
    assert sent_extra("gemini_generate", request)
    assert not sent_extra("openai_chat", request)
    assert extra_fields(Request(model="m")) == []


def test_what_the_model_states_wins_over_an_unnamed_field() -> None:
    """A request made in code (no origin) sends its extra fields to any dialect, and
    where the built body sets a field, the built value stays."""
    request = Request(
        model="m",
        messages=[Message(role="user", content=[TextPart(text="hi")])],
        temperature=0.5,
        extra={"seed": 1, "model": "other", "generationConfig": {"topK": 2, "temperature": 1.0}},
    )
    assert request.origin is None
    chat = build_request("openai_chat", request).body
    assert chat["seed"] == 1 and chat["model"] == "m" and chat["temperature"] == 0.5
    gemini = build_request("gemini_generate", request).body
    assert gemini["generationConfig"] == {"topK": 2, "temperature": 0.5}


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"functionCallingConfig": {"mode": "AUTO"}}),
        ("required", {"functionCallingConfig": {"mode": "ANY"}}),
        ("none", {"functionCallingConfig": {"mode": "NONE"}}),
        (
            "get_weather",
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
        ),
    ],
)
def test_gemini_tool_config_is_the_tool_choice(choice: str, config: dict) -> None:  # type: ignore[type-arg]
    body = {"contents": [{"parts": [{"text": "hi"}]}], "toolConfig": config}
    request = parse_request("gemini_generate", body, model="m")
    assert request.tool_choice == choice and request.extra is None
    assert build_request("anthropic_messages", request).body["tool_choice"]
    # One that a tool choice cannot state stays as it came, for Gemini only.
    two = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a", "b"]}}
    request = parse_request("gemini_generate", {**body, "toolConfig": two}, model="m")
    assert request.tool_choice == "required" and request.extra == {"toolConfig": two}


def test_responses_include_for_reasoning_is_read_with_it() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "reasoning": {"effort": "high"},
        "include": ["reasoning.encrypted_content"],
    }
    assert parse_request("openai_responses", body).extra is None
    no_reasoning = {k: v for k, v in body.items() if k != "reasoning"}
    assert parse_request("openai_responses", no_reasoning).extra == {
        "include": ["reasoning.encrypted_content"]
    }


def test_a_pass_through_body_is_the_clients_but_for_what_the_caller_decides() -> None:
    """Built again for its own dialect, a request goes as its body came (nested fields
    the unified request has no place for too), but for the model, streaming and the
    caller's own settings, taken from the built body."""
    anthropic = {
        "model": "claude-alias",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        "tools": [
            {
                "name": "f",
                "input_schema": {"type": "object"},
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    request = parse_request("anthropic_messages", anthropic)
    built = build_request(
        "anthropic_messages", msgspec.structs.replace(request, model="claude-x", stream=True)
    ).body
    assert "cache_control" not in str(built)  # what the unified request keeps
    sent = pass_through_body("anthropic_messages", anthropic, built)
    assert sent == {**anthropic, "model": "claude-x", "stream": True}
    # Chat: a message's name, and the caller's stream options joined to the client's.
    chat = {
        "model": "gpt-alias",
        "messages": [{"role": "user", "name": "ann", "content": "hi"}],
        "stream_options": {"include_obfuscation": False},
    }
    request = parse_request("openai_chat", chat)
    assert request.include_usage is False
    built = build_request(
        "openai_chat",
        msgspec.structs.replace(request, model="gpt-x", stream=True, include_usage=True),
    ).body
    assert pass_through_body("openai_chat", chat, built) == {
        "model": "gpt-x",
        "messages": [{"role": "user", "name": "ann", "content": "hi"}],
        "stream_options": {"include_obfuscation": False, "include_usage": True},
        "stream": True,
    }
    # Responses: background as the caller decides; include lists joined.
    responses = {
        "model": "gpt-alias",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "reasoning": {"effort": "low", "summary": "detailed"},
        "include": ["message.output_text.logprobs"],
    }
    request = parse_request("openai_responses", responses)
    built = build_request(
        "openai_responses",
        msgspec.structs.replace(request, model="gpt-x", stream=True, background=True),
    ).body
    assert pass_through_body("openai_responses", responses, built) == {
        **responses,
        "model": "gpt-x",
        "stream": True,
        "background": True,
        "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
    }
    # A background response is stored: the client's store: false gives way.
    stored = pass_through_body("openai_responses", {**responses, "store": False}, built)
    assert "store" not in stored and stored["background"] is True
    foreground = build_request(
        "openai_responses", msgspec.structs.replace(request, model="gpt-x", stream=True)
    ).body
    kept = pass_through_body("openai_responses", {**responses, "store": False}, foreground)
    assert kept["store"] is False and "background" not in kept
    # Gemini: the model and streaming are in the URL; the body goes as it came.
    gemini = {"contents": [{"parts": [{"text": "hi", "videoMetadata": {"fps": 1}}]}]}
    built = build_request("gemini_generate", parse_request("gemini_generate", gemini, model="g"))
    assert pass_through_body("gemini_generate", gemini, built.body) == gemini
    with pytest.raises(RequestError, match="no request codec"):
        pass_through_body("nope", {}, {})


def test_each_dialect_binds_the_codec_of_its_family() -> None:
    """Every registered dialect's binding names a request codec of its own family, and
    the Messages dialects send to their provider's path."""
    from polystream.dialects import DIALECTS

    for name, spec in DIALECTS.items():
        assert spec.request_codec().family == spec.family, name
    request = parse_request(
        "anthropic_messages",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert build_request("anthropic_messages", request).path == "/v1/messages"
    assert build_request("xai_messages", request).path == "/messages"


def test_the_family_codecs_load_with_the_first_request_not_with_the_package() -> None:
    import subprocess
    import sys

    code = (
        "import sys, polystream, polystream.request\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.endswith(('.request', "
        "'_request_common')) and m.startswith('polystream.dialects'))\n"
        "print(loaded())\n"
        "polystream.request.parse_request('openai_chat', {'model': 'm', 'messages': []})\n"
        "print(loaded())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "[]",
        "['polystream.dialects._chat.request', 'polystream.dialects._request_common']",
    ]
