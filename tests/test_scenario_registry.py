"""The emulator reads each dialect's facts from the registry: error statuses and bodies,
model names, reply shapes, resumable dialects and the demo's models."""

from __future__ import annotations

import json

import pytest

from polystream.dialects import DIALECTS, PROVIDERS, SSE_DIALECTS, match_route
from polystream.scenario import (
    MODEL_PATTERNS,
    RESUMABLE,
    Emulator,
    error_answer,
    parse_scenarios,
    summarize,
)
from polystream.scenario._demo import DEMO_MODELS, DEMO_QUESTION, demo_request
from polystream.scenario._errors import ANTHROPIC_SHAPE, GOOGLE_SHAPE, OPENAI_SHAPE
from polystream.scenario._reply import ID_PREFIXES

MESSAGES_BODY = (
    b'{"model": "grok-4.3", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}'
)


def test_an_overloaded_unary_answer_on_xai_messages_is_anthropics_529() -> None:
    # xAI's /v1/messages speaks Anthropic's shape and is read by the Anthropic SDK, so it
    # answers an overloaded error as Anthropic does (its spec's overloaded_status).
    emulator = Emulator(parse_scenarios({"faults": {"error": {"kind": "overloaded"}}}))
    answer = emulator.answer("xai_messages", MESSAGES_BODY)
    assert answer.status == 529
    body = json.loads(b"".join(chunk.data for chunk in answer.plan.chunks))
    assert body["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_a_cause_without_a_status_of_its_own_is_a_500() -> None:
    for kind in ("truncated", "cancelled", "unknown", "protocol"):
        emulator = Emulator(parse_scenarios({"faults": {"error": {"kind": kind}}}))
        assert emulator.answer("xai_messages", MESSAGES_BODY).status == 500, kind


def test_gateway_statuses_have_named_errors() -> None:
    assert json.loads(error_answer("openai", 504, "slow").body) == {
        "error": {"message": "slow", "type": "server_error", "param": None, "code": "timeout"}
    }
    assert json.loads(error_answer("gemini", 502, "bad").body) == {
        "error": {"code": 502, "message": "bad", "status": "UNAVAILABLE"}
    }


def test_an_anthropic_shaped_refusal_keeps_the_providers_wording() -> None:
    # The shape has no param field: the message is Anthropic's own, not suffixed.
    answer = Emulator().answer("xai_messages", b'{"model": "grok-4.3", "messages": []}')
    assert answer.status == 400
    assert b"".join(chunk.data for chunk in answer.plan.chunks) == (
        b'{"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"max_tokens: Field required"},"request_id":"req_'
        + answer.headers["request-id"][4:].encode()
        + b'"}'
    )


def test_tables_come_from_the_registry() -> None:
    assert (OPENAI_SHAPE, ANTHROPIC_SHAPE, GOOGLE_SHAPE) == ("openai", "anthropic", "google")
    assert {name: p.model_prefixes for name, p in PROVIDERS.items()} == MODEL_PATTERNS
    assert {"openai_responses", "xai_responses", "gemini_interactions"} == RESUMABLE
    assert {name: spec.reply.demo_model for name, spec in DIALECTS.items()} == DEMO_MODELS
    assert ID_PREFIXES["gemini_interactions"] == "v1_" and ID_PREFIXES["xai_chat"] == "chatcmpl-"


def test_an_interactions_user_turn_with_only_a_function_result_has_no_text() -> None:
    summary = summarize(
        "gemini_interactions",
        {
            "model": "gemini-3.8-flash",
            "input": [
                {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                {"role": "model", "content": [{"type": "function_call", "id": "c", "name": "w"}]},
                {"role": "user", "content": [{"type": "function_result", "call_id": "c"}]},
            ],
        },
    )
    assert summary.user_text == "weather?" and summary.has_tool_result


@pytest.mark.parametrize("dialect", sorted(SSE_DIALECTS))
def test_each_demo_step_is_a_request_the_emulator_reads_as_the_turn(dialect: str) -> None:
    first = demo_request(dialect, 1)
    second = demo_request(dialect, 2, "call_x")
    route = match_route("POST", first.path.partition("?")[0])
    assert route is not None and route.dialect == dialect
    model = route.params.get("model")
    one = summarize(dialect, first.body, model=model, stream=route.route.stream)
    two = summarize(dialect, second.body, model=model, stream=route.route.stream)
    assert (one.user_text, one.has_tools, one.has_tool_result) == (DEMO_QUESTION, True, False)
    assert (two.user_text, two.has_tools, two.has_tool_result) == (DEMO_QUESTION, True, True)
    assert one.model == DEMO_MODELS[dialect] and one.stream
