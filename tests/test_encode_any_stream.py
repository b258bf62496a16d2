"""Every encoder writes a stream its own dialect's strict decoder reads, whatever
well-formed unified stream it is given.

The streams are generated: any source dialect (or none: no StreamStart, and maybe an
unknown event first), blocks of every kind opened and closed in any order, each delta
type on any open block (a data delta on a text block, a citation on a block the target
cannot carry), usage updates, keep-alives, metadata, errors of any kind at any point,
and a Finish of any status (or none). What a target cannot carry must be reported as a
loss, never written as something its readers reject. Where one case broke a target, it
has its own test below, with the bytes it must write.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polystream import Result, StreamDecoder
from polystream.accumulate import accumulate
from polystream.dialects import DIALECTS, get_dialect
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
)

TARGETS = [*DIALECTS, "gemini_generate:json_array"]
KINDS: list[BlockKind] = [
    "text",
    "reasoning",
    "tool_call",
    "server_tool_call",
    "server_tool_result",
    "image",
    "audio",
    "refusal",
    "compaction",
    "code",
    "code_result",
    "other",
]
SOURCES = [
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "gemini_generate",
    "gemini_interactions",
    "xai_responses",
]
TEXTS = ["hi", " there", "é\u2028", '"q"', "\\", "line\n", "", "{}", "\x00"]
CITATION = {"type": "url_citation", "url": "https://e.example", "title": "t"}
STOP = FinishReason(unified="stop", raw=None)
BOOM = ErrorInfo(kind="server", message="boom")


def _options(target: str) -> dict[str, Any]:
    framing = target.partition(":")[2]
    return {"framing": framing} if framing else {}


def _encode(target: str, events: list[Event]) -> tuple[bytes, Any]:
    name = target.partition(":")[0]
    encoder = get_dialect(name).encoder(**_options(target))
    out = b"".join(encoder.encode(event) for event in events) + encoder.close()
    return out, encoder


def _decode(target: str, data: bytes) -> list[Event]:
    return _decoder(target, data).events


def _result(target: str, data: bytes) -> Result:
    return _decoder(target, data).result()


def _decoder(target: str, data: bytes) -> StreamDecoder:
    """``data`` decoded whole, strictly, in the target's dialect (and framing)."""
    decoder = StreamDecoder(
        target.partition(":")[0], strict=True, keep_events=True, **_options(target)
    )
    decoder.feed(data)
    decoder.close()
    return decoder


def _stream(rng: random.Random) -> list[Event]:
    """A well-formed unified stream (block indexes in order, deltas only on open
    blocks, at most one Finish, last), built from ``rng``."""
    events: list[Event] = []
    if rng.random() < 0.95:
        source = rng.choice(SOURCES)
        events.append(StreamStart(dialect=source, id=rng.choice(["r1", None]), model="m"))
    elif rng.random() < 0.5:
        # A source whose first event did not parse: an event of no known dialect. (After
        # a StreamStart of its own dialect, a target passes unknown events through.)
        events.append(Unknown(name="message_start", data='{"typ":"message_start"}'))
    opened: list[tuple[int, BlockKind]] = []
    index = 0
    for _ in range(rng.randint(0, 25)):
        roll = rng.random()
        if roll < 0.15 and index < 8:
            kind = rng.choice(KINDS)
            name = {"tool_call": "get_weather", "server_tool_call": "web_search"}.get(kind)
            events.append(
                BlockStart(
                    index=index,
                    kind=kind,
                    id=rng.choice([None, f"id{index}"]),
                    call_id=rng.choice([None, f"call{index}"]),
                    name="thing" if kind == "other" else name,
                    candidate=0 if rng.random() < 0.9 else 1,
                )
            )
            opened.append((index, kind))
            index += 1
        elif roll < 0.6 and opened:
            at, kind = rng.choice(opened)
            pick = rng.random()
            if kind in ("image", "audio") or pick < 0.08:
                events.append(
                    DataDelta(
                        index=at,
                        delta="QUJDREVGR0g=",
                        mime_type=rng.choice([None, "image/png", "audio/pcm"]),
                        replace=rng.random() < 0.2,
                    )
                )
            elif kind in ("tool_call", "server_tool_call", "code") and pick < 0.7:
                events.append(ToolInputDelta(index=at, delta=rng.choice(['{"a":', "1}", ""])))
            elif kind == "reasoning" and pick < 0.5:
                events.append(ReasoningDelta(index=at, delta=rng.choice(TEXTS)))
            elif pick < 0.8:
                events.append(TextDelta(index=at, delta=rng.choice(TEXTS)))
            elif pick < 0.9:
                events.append(SignatureDelta(index=at, delta="c2lnbmF0dXJl"))
            else:
                events.append(Citation(index=at, citation=dict(CITATION)))
        elif roll < 0.7 and opened:
            at, _ = opened.pop(rng.randrange(len(opened)))
            events.append(BlockEnd(index=at))
        elif roll < 0.78:
            usage = Usage(input_tokens=rng.randint(0, 9), output_tokens=rng.randint(0, 9))
            if rng.random() < 0.5:  # an update that reports one count of the two
                usage = rng.choice(
                    [
                        Usage(input_tokens=usage.input_tokens),
                        Usage(output_tokens=usage.output_tokens),
                    ]
                )
            events.append(UsageUpdate(usage=usage))
        elif roll < 0.8:
            events.append(KeepAlive(comment="k"))
        elif roll < 0.82:
            events.append(Metadata(name="grounding", value={"a": 1}))
        elif roll < 0.84:
            events.append(Citation(index=None, citation=dict(CITATION)))
        elif roll < 0.86:
            kind_of_error = rng.choice(["server", "overloaded", "rate_limit", "protocol"])
            events.append(ErrorEvent(error=ErrorInfo(kind=kind_of_error, message="boom")))
        elif roll < 0.88:
            events.append(StatusUpdate(status="in_progress"))
    if rng.random() < 0.7:
        events.extend(BlockEnd(index=at) for at, _ in opened)
    if rng.random() < 0.97:
        status = rng.choice(["completed", "incomplete", "failed", "truncated"])
        reason = rng.choice(
            ["stop", "length", "tool_calls", "content_filter", "refusal", "pause", "error"]
        )
        events.append(
            Finish(
                status=status,  # type: ignore[arg-type]
                reason=FinishReason(unified=reason, raw=None),  # type: ignore[arg-type]
                error=BOOM if status in ("failed", "truncated") else None,
                usage=rng.choice([None, Usage(input_tokens=3, output_tokens=4)]),
            )
        )
    return events


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_every_target_reads_back_what_its_encoder_wrote(rng: random.Random) -> None:
    events = _stream(rng)
    for target in TARGETS:
        out, _ = _encode(target, events)
        decoded = _decode(target, out)
        assert [type(event) for event in decoded].count(Finish) == 1, target
        assert type(decoded[-1]) is Finish, target


def _usage_of(events: list[Event]) -> tuple[int, int]:
    """The input and output counts the usage updates and the Finish leave."""
    usage = accumulate([e for e in events if type(e) in (UsageUpdate, Finish)]).usage
    return usage.input_tokens or 0, usage.output_tokens or 0


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_every_target_reports_the_usage_the_accumulator_holds(rng: random.Random) -> None:
    # A completed stream without an error event (an error ends some dialects' streams
    # where it comes): the input and output counts the target's reader finds are the
    # ones every update and the Finish leave an accumulator with, whatever counts each
    # update leaves out, and whatever dialect the stream names (one that names the
    # target's own but carries none of its extras included).
    events = _stream(rng)
    finish = events[-1] if events and type(events[-1]) is Finish else None
    if finish is None or finish.status != "completed":
        return
    if any(type(event) is ErrorEvent for event in events):
        return
    for target in TARGETS:
        out, _ = _encode(target, events)
        assert _usage_of(_decode(target, out)) == _usage_of(events), target


def test_interactions_writes_no_event_of_another_dialect_before_its_stream_start() -> None:
    # A stream whose first event did not parse (tolerant decoding of a broken
    # message_start): the Interactions encoder does not know the stream's dialect yet,
    # so an unknown event is another dialect's until a StreamStart says otherwise.
    events: list[Event] = [
        Unknown(name="message_start", data='{"typ":"message_start"}'),
        Finish(status="truncated", reason=FinishReason(unified="error"), error=BOOM),
    ]
    out, encoder = _encode("gemini_interactions", events)
    assert b"message_start" not in out
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [("event:unknown", 0)]
    assert type(_decode("gemini_interactions", out)[-1]) is Finish


def test_interactions_passes_its_own_unknown_events_through() -> None:
    events: list[Event] = [
        StreamStart(dialect="gemini_interactions", id="v1_x", model="m"),
        Unknown(name="interaction.future", data='{"event_type":"interaction.future"}'),
    ]
    out, encoder = _encode("gemini_interactions", events)
    assert out.endswith(b'event: interaction.future\ndata: {"event_type":"interaction.future"}\n\n')
    assert encoder.losses == []


@pytest.mark.parametrize("target", ["openai_responses", "xai_responses"])
def test_responses_writes_data_only_into_an_image_generation_item(target: str) -> None:
    # Audio data on a text block (what a tolerant Interactions decode of a broken step
    # gave): a partial image of a message item would not decode.
    events: list[Event] = [
        StreamStart(dialect="gemini_interactions", id="v1_x", model="m", created=1),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="hi"),
        DataDelta(index=0, delta="QUJD", mime_type="audio/l16"),
        BlockEnd(index=0),
        Finish(status="completed", reason=STOP),
    ]
    out, encoder = _encode(target, events)
    assert b"partial_image" not in out
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [("data", 3)]
    assert _result(target, out).text == "hi"


def test_responses_still_writes_partial_images() -> None:
    events: list[Event] = [
        StreamStart(dialect="anthropic_messages", id="r", model="m", created=1),
        BlockStart(index=0, kind="image", id="ig_1"),
        DataDelta(index=0, delta="QUJD", mime_type="image/png", replace=True),
    ]
    out, encoder = _encode("openai_responses", events)
    assert b"event: response.image_generation_call.partial_image\n" in out
    assert b'"output_index":0,"partial_image_index":0,"partial_image_b64":"QUJD"}' in out
    assert encoder.losses == []


@pytest.mark.parametrize("target", ["anthropic_messages", "xai_messages"])
def test_messages_writes_nothing_after_the_error_event(target: str) -> None:
    # ``error`` ends a Messages stream: a reader stops there (the SDK raises), and a
    # strict decoder rejects anything after it.
    events: list[Event] = [
        ErrorEvent(error=BOOM),
        TextDelta(index=0, delta="late"),
        Finish(status="failed", reason=FinishReason(unified="error"), error=BOOM),
    ]
    out, encoder = _encode(target, events)
    assert out == (
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"boom"}}\n\n'
    )
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [("after_error", 1)]
    assert _result(target, out).status == "failed"


def test_messages_after_the_error_event_a_second_finish_is_still_refused() -> None:
    from polystream.errors import LocalProtocolError

    encoder = get_dialect("anthropic_messages").encoder()
    encoder.encode(StreamStart(dialect="openai_chat", id="c", model="m"))
    encoder.encode(ErrorEvent(error=BOOM))
    failed = Finish(status="failed", reason=FinishReason(unified="error"), error=BOOM)
    assert encoder.encode(failed) == b""
    with pytest.raises(LocalProtocolError, match="a second Finish"):
        encoder.encode(failed)


@pytest.mark.parametrize("target", ["openai_chat", "xai_chat"])
def test_chat_does_not_carry_a_citation_of_a_block_it_dropped(target: str) -> None:
    # An ``other`` block has no Chat form: its citation would need a carried start
    # entry for a kind the carrier has no entry for.
    events: list[Event] = [
        StreamStart(dialect="gemini_interactions", id="v1_x", model="m", created=1),
        BlockStart(index=0, kind="other", name="future_step"),
        TextDelta(index=0, delta="dropped"),
        Citation(index=0, citation=dict(CITATION)),
        BlockEnd(index=0),
        Finish(status="completed", reason=STOP),
    ]
    out, encoder = _encode(target, events)
    assert b'"type":"start"' not in out
    assert b"url_citation" not in out
    assert [(loss.what, loss.event_index, loss.carried) for loss in encoder.losses] == [
        ("block:other", 1, False),
        ("citation", 3, False),
    ]
    assert type(_decode(target, out)[-1]) is Finish


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_gemini_joins_its_own_call_arguments_given_in_fragments(framing: str) -> None:
    # This dialect's decoder gives a call's args in one delta; fragments (events made
    # another way) are joined until they parse, and never raise a JSON error.
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r", model="m"),
        BlockStart(index=0, kind="tool_call", name="get_weather"),
        ToolInputDelta(index=0, delta='{"city":'),
        ToolInputDelta(index=0, delta='"Paris"}'),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="STOP")),
    ]
    out, encoder = _encode(f"gemini_generate:{framing}", events)
    assert encoder.losses == []
    result = _result(f"gemini_generate:{framing}", out)
    assert [(call.name, call.arguments) for call in result.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]


def test_gemini_writes_its_own_call_with_arguments_that_never_parse_as_unfinished() -> None:
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r", model="m"),
        BlockStart(index=0, kind="tool_call", name="get_weather"),
        ToolInputDelta(index=0, delta='{"city":'),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="tool_calls", raw="STOP")),
    ]
    out, encoder = _encode("gemini_generate", events)
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("tool_call.arguments", 3)
    ]
    assert b'"functionCall": {"name": "get_weather","willContinue": true}' in out
    decoded = _decode("gemini_generate", out)
    assert type(decoded[-1]) is Finish


@pytest.mark.parametrize("target", ["openai_chat", "xai_chat"])
def test_chat_opens_choices_in_index_order(target: str) -> None:
    # Gemini's second candidate may have output before the first: its chunk would be
    # the first of the stream, and the openai SDK's accumulator fails on a choice whose
    # lower indexes it has not seen (IndexError). Choice 0 is opened first.
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r", model="m"),
        BlockStart(index=0, kind="text", candidate=1),
        TextDelta(index=0, delta="second"),
        BlockStart(index=1, kind="text", candidate=0),
        TextDelta(index=1, delta="first"),
        BlockEnd(index=0),
        BlockEnd(index=1),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="STOP")),
    ]
    encoder = get_dialect(target).encoder(id_factory=lambda: "chatcmpl-1")
    out = b"".join(encoder.encode(event) for event in events) + encoder.close()
    chunks = [line for line in out.split(b"\n\n") if line.startswith(b"data: {")]
    if target == "openai_chat":
        # OpenAI opens every choice with its documented first delta, before any output.
        opening = (
            b'{"role":"assistant","content":"","refusal":null}'
            b',"logprobs":null,"finish_reason":null}]}'
        )
        assert chunks[0].endswith(b'"choices":[{"index":0,"delta":' + opening)
        assert chunks[1].endswith(b'"choices":[{"index":1,"delta":' + opening)
        assert b'"index":1,"delta":{"content":"second"}' in chunks[2]
    else:
        # xAI sends the role with the first text: choice 0 opens with the role alone.
        assert chunks[0].endswith(b'"choices":[{"index":0,"delta":{"role":"assistant"}}]}')
        assert b'"index":1,"delta":{"role":"assistant","content":"second"}' in chunks[1]
    result = _result(target, out)
    assert [(b.candidate, b.text) for b in result.blocks] == [(1, "second"), (0, "first")]

    import httpx2
    import openai

    def serve(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=out)

    client = openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    with client.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "x"}], n=2
    ) as stream:
        completion = stream.get_final_completion()
    assert [(c.index, c.message.content) for c in completion.choices] == [
        (0, "first"),
        (1, "second"),
    ]


@pytest.mark.parametrize("target", ["anthropic_messages", "xai_messages"])
def test_messages_merges_the_usage_updates_before_its_first_block(target: str) -> None:
    # Two updates before the first block, the second without the input count: the held
    # message_start, and so the reply's usage, keeps it, as the accumulator does (each
    # update once replaced the one before).
    events: list[Event] = [
        StreamStart(dialect="openai_chat", id="c", model="m"),
        UsageUpdate(usage=Usage(input_tokens=5, output_tokens=0)),
        UsageUpdate(usage=Usage(output_tokens=1)),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="hi"),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    out, _ = _encode(target, events)
    start = out.split(b"\n\n")[0]
    assert start.endswith(b'"usage":{"input_tokens":5,"output_tokens":1}}}')
    usage = _result(target, out).usage
    assert (usage.input_tokens, usage.output_tokens) == (5, 1)


@pytest.mark.parametrize("framing", ["sse", "json_array"])
def test_gemini_ends_its_own_dialect_s_events_made_without_its_extras(framing: str) -> None:
    # Events that name gemini_generate but carry none of its chunks' extras (made by
    # hand): no chunk of this dialect was written from them, so the Finish writes the
    # last chunk, with the finish reason and the usage, as for another dialect.
    events: list[Event] = [
        StreamStart(dialect="gemini_generate", id="r", model="m"),
        UsageUpdate(usage=Usage(input_tokens=3)),
        Finish(
            status="completed",
            reason=FinishReason(unified="stop"),
            usage=Usage(input_tokens=3, output_tokens=4),
        ),
    ]
    target = "gemini_generate" if framing == "sse" else "gemini_generate:json_array"
    out, _ = _encode(target, events)
    result = _result(target, out)
    assert result.status == "completed"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 4)
    assert b'"finishReason": "STOP"' in out
