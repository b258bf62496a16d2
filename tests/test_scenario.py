"""The emulator's sans-I/O core: scenario format, request summaries, reply events,
delivery plans, provider error shapes, and the Emulator's decisions (no sockets)."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.events import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningDelta,
    SignatureDelta,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)
from polystream.scenario import (
    KEEPALIVE,
    Emulator,
    Faults,
    Frame,
    InBandError,
    Reply,
    RequestError,
    Scenario,
    ScenarioError,
    Timing,
    error_answer,
    frames_after,
    load_scenarios,
    parse_scenarios,
    plan_delivery,
    render_frames,
    reply_events,
    retarget,
    schedule,
    split_text,
    summarize,
)
from polystream.scenario._reply import strip_usage
from tests.server.support import WEATHER, require


def body_of(answer: object) -> bytes:
    return b"".join(chunk.data for chunk in answer.plan.chunks)  # type: ignore[attr-defined]


# -- format -----------------------------------------------------------------------------


def test_load_scenarios_shapes() -> None:
    one = load_scenarios(b'{"name": "a", "reply": {"text": "hi"}}')
    many = load_scenarios(b'[{"name": "a"}, {"name": "b"}]')
    wrapped = load_scenarios(b'{"scenarios": [{"name": "a"}]}')
    assert [s.name for s in one] == ["a"]
    assert [s.name for s in many] == ["a", "b"]
    assert [s.name for s in wrapped] == ["a"]
    assert one[0].reply is not None and one[0].reply.text == "hi"
    assert one[0].timing == Timing() and one[0].faults == Faults()


def test_load_scenarios_yaml() -> None:
    pytest.importorskip("yaml")
    text = "scenarios:\n  - match: {model: 'gpt-*'}\n    reply:\n      text: [a, b]\n"
    (scenario,) = load_scenarios(text, format="yaml")
    assert scenario.match.model == "gpt-*"
    assert scenario.reply is not None and scenario.reply.text == ["a", "b"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (b'{"faults": {"http_eror": {"status": 429}}}', "http_eror"),
        (b'{"timing": {"speed": 0}}', "speed"),
        (b'{"faults": {"http_error": {"status": 200}}}', "4xx or 5xx"),
        (b'{"reply": {"tool_calls": [{"arguments": {}}]}}', "name"),
        (b'{"scenarios": [], "extra": 1}', "only 'scenarios'"),
        (b"42", "expected a scenario object"),
        (b"{nope", "invalid JSON"),
        (b'{"timing": {"recorded": [0.5, 0.1]}}', "must not decrease"),
        # A Retry-After the emulator cannot write (it overflowed as milliseconds).
        (b'{"faults": {"http_error": {"status": 429, "retry_after": -1e308}}}', "retry_after"),
        (b'{"faults": {"http_error": {"status": 429, "retry_after": 1e308}}}', "retry_after"),
        (b'{"faults": {"http_error": {"status": 429, "times": -1}}}', "times"),
    ],
)
def test_invalid_scenarios_name_the_problem(document: bytes, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        load_scenarios(document, source="s.json")


@pytest.mark.parametrize(
    "document",
    [
        {"timing": {"delay": float("inf")}},
        {"timing": {"recorded": [0.0, float("nan")]}},
        {"faults": {"keepalive": float("inf")}},
    ],
)
def test_durations_must_be_finite(document: dict[str, Any]) -> None:
    # (JSON has no infinity, YAML has: .inf)
    with pytest.raises(ScenarioError, match="finite"):
        parse_scenarios(document)


def test_matching_rules() -> None:
    (scenario,) = parse_scenarios(
        {
            "match": {
                "model": "gpt-*",
                "contains": "weather",
                "tools": True,
                "provider": ["openai", "xai"],
            }
        }
    )
    base = {
        "dialect": "openai_chat",
        "provider": "openai",
        "model": "gpt-5",
        "user_text": "the weather?",
        "has_tools": True,
        "has_tool_result": False,
    }
    assert scenario.matches(**base)  # type: ignore[arg-type]
    assert not scenario.matches(**{**base, "model": "claude-x"})  # type: ignore[arg-type]
    assert not scenario.matches(**{**base, "user_text": "hello"})  # type: ignore[arg-type]
    assert not scenario.matches(**{**base, "has_tools": False})  # type: ignore[arg-type]
    assert not scenario.matches(**{**base, "provider": "gemini"})  # type: ignore[arg-type]
    (second,) = parse_scenarios({"match": {"tool_result": True, "dialect": "openai_chat"}})
    assert second.matches(**{**base, "has_tool_result": True})  # type: ignore[arg-type]
    assert not second.matches(**base)  # type: ignore[arg-type]
    assert not second.matches(
        **{
            **base,
            "has_tool_result": True,  # type: ignore[arg-type]
            "dialect": "xai_chat",
        }
    )


# -- request summaries --------------------------------------------------------------------


def test_summaries_per_dialect() -> None:
    responses = summarize(
        "openai_responses",
        {
            "model": "gpt-5",
            "stream": True,
            "background": True,
            "tools": [{"type": "function", "name": "f"}],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hey"}]},
                {"type": "function_call_output", "call_id": "c", "output": "1"},
            ],
        },
    )
    assert (responses.model, responses.stream, responses.background) == ("gpt-5", True, True)
    assert responses.user_text == "hey" and responses.has_tool_result
    assert responses.tool_names == ("f",)
    chat = summarize(
        "xai_chat",
        {
            "model": "grok-4",
            "messages": [{"role": "user", "content": "yo"}],
            "stream_options": {"include_usage": True},
            "tools": [{"type": "function", "function": {"name": "g"}}],
        },
    )
    assert chat.provider == "xai" and chat.include_usage and chat.tool_names == ("g",)
    assert chat.user_text == "yo" and not chat.has_tool_result
    messages = summarize(
        "anthropic_messages",
        {
            "model": "claude-x",
            "max_tokens": 5,
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            ],
        },
    )
    assert messages.user_text == "q" and messages.has_tool_result
    gemini = summarize(
        "gemini_generate",
        {
            "contents": [{"parts": [{"text": "hello"}, {"text": "x", "thought": True}]}],
            "tools": [{"functionDeclarations": [{"name": "h"}]}],
        },
        model="models/gemini-3",
        stream=True,
    )
    assert (gemini.model, gemini.user_text, gemini.stream) == ("gemini-3", "hello", True)
    assert gemini.tool_names == ("h",)
    interaction = summarize(
        "gemini_interactions",
        {
            "model": "gemini-3",
            "stream": True,
            "input": [
                {"type": "user_input", "content": [{"type": "text", "text": "hi"}]},
                {"type": "function_result", "call_id": "c", "result": "r"},
            ],
        },
    )
    assert interaction.user_text == "hi" and interaction.has_tool_result
    assert summarize("gemini_interactions", {"model": "m", "input": "plain"}).user_text == "plain"


@pytest.mark.parametrize(
    ("dialect", "body", "message"),
    [
        ("openai_responses", {"input": "x"}, "Missing required parameter: 'model'."),
        ("openai_chat", {"model": "gpt-5"}, "Missing required parameter: 'messages'."),
        ("openai_chat", {"model": "gpt-5", "messages": []}, "empty array"),
        ("openai_responses", {"model": 5}, "Invalid type for 'model'"),
        (
            "openai_chat",
            {"model": "m", "messages": [{"role": "user"}], "stream": "yes"},
            "Invalid type for 'stream'",
        ),
        ("anthropic_messages", {"model": "c", "messages": []}, "max_tokens: Field required"),
        ("anthropic_messages", {"model": "c", "max_tokens": 0, "messages": []}, "greater than 0"),
        ("gemini_generate", {}, "contents is not specified"),
        ("gemini_interactions", {"input": "x"}, "'model' or 'agent'"),
        ("xai_messages", [1], "JSON object"),
    ],
)
def test_invalid_requests(dialect: str, body: object, message: str) -> None:
    with pytest.raises(RequestError, match=message) as caught:
        summarize(dialect, body, model="gemini-3")
    assert caught.value.status == 400


# -- reply events -----------------------------------------------------------------------------


def test_split_text() -> None:
    assert split_text("one two  three ", None) == ["one", " two", "  three", " "]
    assert split_text("héllo", 2) == ["hé", "ll", "o"]
    assert split_text("", None) == []
    text = " lead and\ttabs\nnewline "
    assert "".join(split_text(text, None)) == text


def test_reply_events_structure() -> None:
    (scenario,) = parse_scenarios(WEATHER)
    summary = summarize(
        "openai_chat", {"model": "gpt-5", "messages": [{"role": "user", "content": "weather"}]}
    )
    events = reply_events(scenario.reply, summary, response_id="chatcmpl-1", created=7)
    assert events[0] == StreamStart(dialect="scenario", id="chatcmpl-1", model="gpt-5", created=7)
    starts = [e for e in events if isinstance(e, BlockStart)]
    assert [(s.index, s.kind) for s in starts] == [(0, "reasoning"), (1, "text"), (2, "tool_call")]
    assert starts[2].id == "call_w1" and starts[2].name == "get_weather"
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == (
        "The user wants the weather. Call the tool."
    )
    # Chat has no place for opaque state or item ids: none that would need a carrier.
    assert [e for e in events if isinstance(e, SignatureDelta)] == []
    assert [s.id for s in starts[:2]] == [None, None]
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "Let me check."
    arguments = "".join(e.delta for e in events if isinstance(e, ToolInputDelta))
    assert json.loads(arguments) == {"city": "Paris"}
    assert sum(isinstance(e, BlockEnd) for e in events) == 3
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "completed"
    assert finish.reason.unified == "tool_calls" and finish.reason.raw is None
    usage = finish.usage
    assert usage is not None and usage.total_tokens == usage.input_tokens + usage.output_tokens  # type: ignore[operator]
    assert usage.reasoning_tokens and usage.reasoning_tokens <= usage.output_tokens  # type: ignore[operator]


@pytest.mark.parametrize(
    ("dialect", "signatures", "ids"),
    [
        ("openai_responses", ["c2lnLTE="], ["rs_r-1", "msg_r-1"]),
        ("anthropic_messages", ["c2lnLTE="], [None, None]),
        ("gemini_generate", ["c2lnLTE="], [None, None]),
        ("xai_chat", [], [None, None]),
    ],
)
def test_reply_events_carry_only_what_the_dialect_has(
    dialect: str, signatures: list[str], ids: list[str | None]
) -> None:
    (scenario,) = parse_scenarios(WEATHER)
    body = {"model": "m", "messages": [{"role": "user", "content": "weather"}], "max_tokens": 9}
    if dialect == "gemini_generate":
        body = {"contents": [{"role": "user", "parts": [{"text": "weather"}]}]}
    elif dialect == "openai_responses":
        body = {"model": "m", "input": "weather"}
    summary = summarize(dialect, body, model="gemini-3")
    events = reply_events(scenario.reply, summary, response_id="r-1")
    assert [e.delta for e in events if isinstance(e, SignatureDelta)] == signatures
    assert [e.id for e in events if isinstance(e, BlockStart)][:2] == ids


def test_emulated_chat_streams_hold_no_carrier() -> None:
    # What OpenAI and xAI send: no ``polystream`` entry, though the scenario has
    # reasoning with a signature (Responses' item ids and the signature have no place).
    emulator = Emulator(parse_scenarios(WEATHER))
    for dialect, model in (("openai_chat", "gpt-5"), ("xai_chat", "grok-4.3")):
        message = {"role": "user", "content": "weather"}
        body = {"model": model, "stream": True, "messages": [message]}
        answer = emulator.answer(dialect, json.dumps(body).encode())
        data = b"".join(chunk.data for chunk in answer.plan.chunks)
        assert answer.status == 200
        assert b'"tool_calls"' in data
        assert b"polystream" not in data


def test_emulated_chat_streams_open_as_the_provider_does() -> None:
    # OpenAI's documented first chunk opens the choice with an empty content and a null
    # refusal before any text; xAI sends the role with the first text (its fixtures).
    emulator = Emulator([])
    heads = {
        "openai_chat": (
            b'data: {"id":"chatcmpl-097a7be0be0dd835c48279ea","object":"chat.completion.chunk",'
            b'"created":0,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant",'
            b'"content":"","refusal":null},"logprobs":null,"finish_reason":null}]}\n\n'
            b'data: {"id":"chatcmpl-097a7be0be0dd835c48279ea","object":"chat.completion.chunk",'
            b'"created":0,"model":"gpt-5","choices":[{"index":0,"delta":{"content":"Emulated"},'
            b'"logprobs":null,"finish_reason":null}]}\n\n'
        ),
        "xai_chat": (
            b'data: {"id":"chatcmpl-d714044b350e6679afe31791","object":"chat.completion.chunk",'
            b'"created":0,"model":"grok-4.3","choices":[{"index":0,"delta":{"role":"assistant",'
            b'"content":"Emulated"}}]}\n\n'
        ),
    }
    for dialect, head in heads.items():
        model = "gpt-5" if dialect == "openai_chat" else "grok-4.3"
        body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        answer = emulator.answer(dialect, json.dumps(body).encode())
        data = b"".join(chunk.data for chunk in answer.plan.chunks)
        assert data.startswith(head)


def test_default_reply_is_deterministic_and_quotes_the_user() -> None:
    summary = summarize(
        "anthropic_messages",
        {
            "model": "claude-x",
            "max_tokens": 9,
            "messages": [{"role": "user", "content": "Ça « va » ?"}],
        },
    )
    first = reply_events(None, summary, response_id="msg_1")
    assert first == reply_events(None, summary, response_id="msg_1")
    text = "".join(e.delta for e in first if isinstance(e, TextDelta))
    assert "Ça « va » ?" in text
    assert isinstance(first[-1], Finish) and first[-1].reason.unified == "stop"


def test_explicit_deltas_usage_and_finish() -> None:
    (scenario,) = parse_scenarios(
        {
            "reply": {
                "text": ["He", "llo"],
                "usage": {"input_tokens": 3, "output_tokens": 2},
                "finish": {"status": "incomplete", "reason": "length", "raw": "max_tokens"},
            }
        }
    )
    summary = summarize("openai_chat", {"model": "gpt-5", "messages": [{"role": "user"}]})
    events = reply_events(scenario.reply, summary, response_id="x")
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["He", "llo"]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "incomplete"
    assert (finish.reason.unified, finish.reason.raw) == ("length", "max_tokens")
    assert finish.usage == Usage(input_tokens=3, output_tokens=2, total_tokens=5)
    stripped = strip_usage([*events[:-1], UsageUpdate(usage=Usage(input_tokens=1)), finish])
    assert not any(isinstance(e, UsageUpdate) for e in stripped)
    assert isinstance(stripped[-1], Finish) and stripped[-1].usage is None


def test_retarget_drops_source_only_fields() -> None:
    events = [
        StreamStart(dialect="anthropic_messages", id="msg_a", extra={"k": 1}),
        BlockStart(index=0, kind="text", extra={"native": True}, cursor=3),
        TextDelta(index=0, delta="x", raw={"r": 1}),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn")),
    ]
    other = retarget(events, dialect="openai_chat", response_id="chatcmpl-9", model="gpt-5")
    assert other[0] == StreamStart(dialect="anthropic_messages", id="chatcmpl-9", model="gpt-5")
    assert all(e.extra is None and e.cursor is None and e.raw is None for e in other)
    assert isinstance(other[-1], Finish) and other[-1].reason.raw is None
    same = retarget(events, dialect="anthropic_messages", response_id="msg_b")
    assert same[1].extra == {"native": True} and same[2].raw is None
    assert isinstance(same[-1], Finish) and same[-1].reason.raw == "end_turn"


# -- delivery plans --------------------------------------------------------------------------


def test_schedule() -> None:
    assert schedule(3, Timing(first_event=0.5, delay=0.1)) == pytest.approx([0.5, 0.6, 0.7])
    assert schedule(4, Timing(recorded=[0.0, 1.0], delay=0.5, speed=2.0)) == pytest.approx(
        [0.0, 0.5, 0.75, 1.0]
    )


def frames(*datas: bytes) -> list[Frame]:
    return [Frame(data=d) for d in datas]


def test_plan_keepalive_and_drop() -> None:
    plan = plan_delivery(
        frames(b"data: a\n\n", b"data: b\n\n", b"data: c\n\n"),
        timing=Timing(first_event=0.35, delay=0.25),
        faults=Faults(keepalive=0.1, drop_at_event=2),
        sse=True,
    )
    assert [(round(c.at, 2), c.data) for c in plan.chunks] == [
        (0.1, KEEPALIVE),
        (0.2, KEEPALIVE),
        (0.3, KEEPALIVE),
        (0.35, b"data: a\n\n"),
        (0.45, KEEPALIVE),
        (0.55, KEEPALIVE),
        (0.6, b"data: b\n\n"),
    ]
    assert plan.drop and plan.frames == 2
    cut = plan_delivery(
        frames(b"0123456789", b"abcdef"), timing=Timing(), faults=Faults(drop_at_byte=12), sse=False
    )
    assert b"".join(c.data for c in cut.chunks) == b"0123456789ab" and cut.drop
    whole = plan_delivery(frames(b"x"), timing=Timing(), faults=Faults(), sse=True)
    assert not whole.drop and [c.data for c in whole.chunks] == [b"x"]


def test_plan_odd_boundaries() -> None:
    data = 'data: {"t":"é✓"}\n\n'.encode()
    plan = plan_delivery(
        frames(data),
        timing=Timing(),
        faults=Faults(split_utf8=True, line_endings="crlf", cr_at_chunk_end=True),
        sse=True,
    )
    pieces = [c.data for c in plan.chunks]
    assert b"".join(pieces) == data.replace(b"\n", b"\r\n")
    assert pieces[0].endswith(b"\xc3")  # inside "é"
    assert sum(p.endswith(b"\r") for p in pieces) == 2  # every CRLF cut between CR and LF
    with pytest.raises(UnicodeDecodeError):
        pieces[0].decode()  # a chunk that is not valid UTF-8 on its own
    small = plan_delivery(
        frames(b"abcdefghij"), timing=Timing(), faults=Faults(chunk_size=4), sse=False
    )
    assert [c.data for c in small.chunks] == [b"abcd", b"efgh", b"ij"]
    cr = plan_delivery(
        frames(b"data: x\n\n"), timing=Timing(), faults=Faults(line_endings="cr"), sse=True
    )
    assert cr.chunks[0].data == b"data: x\r\r"


def test_frames_after() -> None:
    numbered = [Frame(data=b"a", cursor=0), Frame(data=b"b", cursor=1), Frame(data=b"c", cursor=2)]
    assert [f.data for f in frames_after(numbered, 0) or []] == [b"b", b"c"]
    assert frames_after(numbered, 2) == []
    named = [Frame(data=b"a", cursor="e1"), Frame(data=b"b", cursor="e2")]
    assert [f.data for f in frames_after(named, "e1") or []] == [b"b"]
    assert frames_after(named, "nope") is None
    assert frames_after(named, None) == named


def test_render_frames_cursors_error_and_no_terminal() -> None:
    require("openai_responses")
    summary = summarize("openai_responses", {"model": "gpt-5", "input": "hi"})
    events = reply_events(None, summary, response_id="resp_1")
    full = render_frames("openai_responses", events)
    assert [f.cursor for f in full] == list(range(len(full)))
    assert b"response.completed" in full[-1].data
    cut = render_frames("openai_responses", events, terminal=False)
    assert not any(b"response.completed" in f.data for f in cut)
    failed = render_frames("openai_responses", events, error=InBandError(after=2))
    assert b"response.failed" in failed[-1].data or b'"type":"error"' in failed[-1].data
    assert not any(b"output_text.delta" in f.data for f in failed)


# -- error shapes ------------------------------------------------------------------------------


def test_error_shapes_and_retry_after() -> None:
    openai = error_answer("openai", 429, retry_after=1.5)
    assert openai.headers["retry-after"] == "2" and openai.headers["retry-after-ms"] == "1500"
    assert set(json.loads(openai.body)["error"]) == {"message", "type", "param", "code"}
    anthropic = json.loads(error_answer("anthropic", 529).body)
    assert anthropic["type"] == "error"
    assert anthropic["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert json.loads(error_answer("xai", 400, dialect="xai_messages").body)["type"] == "error"
    gemini = json.loads(error_answer("gemini", 503, "down").body)
    assert gemini == {"error": {"code": 503, "message": "down", "status": "UNAVAILABLE"}}
    assert "retry-after" not in error_answer("gemini", 500).headers


# -- the emulator's decisions ----------------------------------------------------------------


def test_http_error_times_then_success() -> None:
    require("openai_chat")
    emulator = Emulator(parse_scenarios({"faults": {"http_error": {"status": 503, "times": 2}}}))
    body = b'{"model": "gpt-5", "messages": [{"role": "user", "content": "x"}]}'
    statuses = [emulator.answer("openai_chat", body).status for _ in range(3)]
    assert statuses == [503, 503, 200]


def test_models_known_by_family_scenario_or_any() -> None:
    require("openai_chat")
    body = b'{"model": "my-model", "messages": [{"role": "user", "content": "x"}]}'
    assert Emulator().answer("openai_chat", body).status == 404
    assert Emulator(any_model=True).answer("openai_chat", body).status == 200
    named = Emulator(parse_scenarios({"match": {"model": "my-*"}}))
    assert named.answer("openai_chat", body).status == 200


def test_unary_in_band_error_becomes_http_status() -> None:
    require("anthropic_messages", "openai_chat")
    emulator = Emulator(parse_scenarios({"faults": {"error": {"kind": "overloaded"}}}))
    anthropic = emulator.answer(
        "anthropic_messages",
        b'{"model": "claude-x", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}',
    )
    assert anthropic.status == 529
    chat = emulator.answer("openai_chat", b'{"model": "gpt-5", "messages": [{"role": "user"}]}')
    assert chat.status == 503


def test_background_and_retrieve() -> None:
    require("openai_responses")
    emulator = Emulator()
    created = emulator.answer(
        "openai_responses", b'{"model": "gpt-5", "input": "hi", "background": true}'
    )
    pending = json.loads(body_of(created))
    assert pending["status"] == "queued" and pending["output"] == []
    final = json.loads(body_of(emulator.retrieve("openai_responses", pending["id"])))
    assert final["status"] == "completed" and final["id"] == pending["id"]
    stream = emulator.retrieve("openai_responses", pending["id"], stream=True, cursor=1)
    assert b'"sequence_number":1,' not in body_of(stream)
    assert b'"sequence_number":2,' in body_of(stream)
    assert emulator.retrieve("openai_responses", "resp_unknown").status == 404
    assert emulator.retrieve("xai_responses", pending["id"]).status == 404  # other provider


def test_captures_must_exist() -> None:
    scenario = Scenario(reply=Reply(replay="missing.sse"))
    with pytest.raises(ScenarioError, match=r"missing\.sse"):
        Emulator([scenario])
    with pytest.raises(ScenarioError, match="capture"):
        Emulator(replays=[b"not a stream at all"])


def test_a_reply_that_failed_in_band_is_stored_failed() -> None:
    require("openai_responses")
    emulator = Emulator(parse_scenarios({"faults": {"error": {"after": 3}}}))
    answer = emulator.answer(
        "openai_responses", b'{"model": "gpt-5", "input": "hi", "stream": true}'
    )
    assert b"response.failed" in body_of(answer)
    response_id = json.loads(body_of(answer).split(b"data: ", 1)[1].split(b"\n", 1)[0])["response"][
        "id"
    ]
    stored = json.loads(body_of(emulator.retrieve("openai_responses", response_id)))
    assert stored["status"] == "failed"
    assert stored["error"]["message"] == "Overloaded"


@settings(max_examples=40)
@given(
    datas=st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b + b"\n\n"), max_size=6),
    split_utf8=st.booleans(),
    cr=st.booleans(),
    size=st.none() | st.integers(1, 9),
    keepalive=st.none() | st.floats(0.05, 1.0),
    delay=st.floats(0.0, 0.3),
    drop_byte=st.none() | st.integers(0, 300),
)
def test_plan_keeps_every_byte_in_order(
    datas: list[bytes],
    split_utf8: bool,
    cr: bool,
    size: int | None,
    keepalive: float | None,
    delay: float,
    drop_byte: int | None,
) -> None:
    faults = Faults(
        split_utf8=split_utf8,
        line_endings="crlf" if cr else "lf",
        cr_at_chunk_end=cr,
        chunk_size=size,
        keepalive=keepalive,
        drop_at_byte=drop_byte,
    )
    plan = plan_delivery(frames(*datas), timing=Timing(delay=delay), faults=faults, sse=True)
    sent = b"".join(c.data for c in plan.chunks if c.data != faults_keepalive(cr))
    expected = b"".join(datas)
    if cr:
        expected = expected.replace(b"\r\n", b"\n").replace(b"\r", b"\n").replace(b"\n", b"\r\n")
    if drop_byte is not None:
        whole = b"".join(
            c.data
            for c in plan_delivery(
                frames(*datas),
                timing=Timing(delay=delay),
                faults=Faults(
                    split_utf8=split_utf8,
                    line_endings="crlf" if cr else "lf",
                    cr_at_chunk_end=cr,
                    chunk_size=size,
                    keepalive=keepalive,
                ),
                sse=True,
            ).chunks
        )
        assert b"".join(c.data for c in plan.chunks) == whole[:drop_byte]
        assert plan.drop == (drop_byte < len(whole))
    else:
        assert sent == expected
        assert not plan.drop
    assert all(c.data for c in plan.chunks)
    times = [c.at for c in plan.chunks]
    assert times == sorted(times)
    if size is not None:
        # Keep-alives are written whole; a drop may cut the last one short.
        keepalive_bytes = faults_keepalive(cr)
        chunks = plan.chunks
        if plan.drop and chunks and keepalive_bytes.startswith(chunks[-1].data):
            chunks = chunks[:-1]
        assert all(len(c.data) <= size for c in chunks if c.data != keepalive_bytes)


def faults_keepalive(cr: bool) -> bytes:
    return KEEPALIVE.replace(b"\n", b"\r\n") if cr else KEEPALIVE


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "model",
                    "input",
                    "messages",
                    "contents",
                    "role",
                    "content",
                    "type",
                    "text",
                    "parts",
                    "tools",
                    "stream",
                    "max_tokens",
                    "background",
                    "stream_options",
                    "include_usage",
                    "function",
                    "name",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=150)
@given(
    dialect=st.sampled_from(
        [
            "openai_responses",
            "openai_chat",
            "anthropic_messages",
            "xai_messages",
            "gemini_generate",
            "gemini_interactions",
        ]
    ),
    body=_JSON,
)
def test_any_json_gives_a_summary_or_a_request_error(dialect: str, body: object) -> None:
    try:
        summary = summarize(dialect, body, model="gemini-3", stream=False)
    except RequestError as exc:
        assert 400 <= exc.status < 500 and exc.message
    else:
        assert isinstance(summary.user_text, str) and isinstance(summary.model, str)


def test_the_documented_examples_parse() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "emulator.md").read_text()
    blocks = [b for b in re.findall(r"```json\n(.*?)```", text, re.S) if '"dialects"' not in b]
    assert len(blocks) >= 2
    for block in blocks:
        assert load_scenarios(block)
    if importlib.util.find_spec("yaml") is not None:
        for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
            assert load_scenarios(block, format="yaml")
