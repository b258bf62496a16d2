"""The dialect-agnostic Accumulator: block order, event-order errors, tool arguments
(parsed once, never ``{}`` for bad JSON), signatures, usage and metadata merging,
snapshots, the Result contract, and linear cost (counted, not timed)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from polystream.accumulate import Accumulator, Result, accumulate
from polystream.errors import EventOrderError, ToolArgumentsError
from polystream.events import (
    BlockEnd,
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
    Raw,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)

# The accumulator module (the package exports its function as ``accumulate_events``).
accumulate_module = importlib.import_module("polystream.accumulate")

STOP = Finish(status="completed", reason=FinishReason(unified="stop", raw="end_turn"))


def tool_stream(*fragments: str, end: bool = True, value: Any = None) -> list[Event]:
    events: list[Event] = [
        BlockStart(index=0, kind="tool_call", id="toolu_1", name="get_weather", value=value)
    ]
    events += [ToolInputDelta(index=0, delta=f) for f in fragments]
    if end:
        events.append(BlockEnd(index=0))
    return events


# -- blocks, order, text --------------------------------------------------------------------


def test_text_and_reasoning_concatenate_in_block_order() -> None:
    events: list[Event] = [
        StreamStart(dialect="anthropic_messages", id="msg_1", model="m"),
        BlockStart(index=0, kind="reasoning"),
        BlockStart(index=1, kind="text"),
        BlockStart(index=2, kind="text"),
        # Deltas of several blocks interleave: each goes to its own block.
        TextDelta(index=2, delta="world"),
        TextDelta(index=1, delta="Hello"),
        ReasoningDelta(index=0, delta="think"),
        TextDelta(index=1, delta=", "),
        ReasoningDelta(index=0, delta="ing", summary=True),
        TextDelta(index=2, delta="!"),
        BlockEnd(index=0),
        BlockEnd(index=1),
        BlockEnd(index=2),
        STOP,
    ]
    result = accumulate(events)
    assert result.text == "Hello, world!"
    assert result.reasoning == "thinking"
    assert [(b.index, b.kind, b.text, b.complete) for b in result.blocks] == [
        (0, "reasoning", "thinking", True),
        (1, "text", "Hello, ", True),
        (2, "text", "world!", True),
    ]
    assert (result.dialect, result.id, result.model) == ("anthropic_messages", "msg_1", "m")
    assert result.status == "completed"
    assert result.finish_reason == FinishReason(unified="stop", raw="end_turn")


def test_blocks_are_keyed_by_index_not_position() -> None:
    events: list[Event] = [
        BlockStart(index=5, kind="text"),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta="b"),
        TextDelta(index=5, delta="a"),
    ]
    result = accumulate(events)
    # Block order is the order of opening; each delta lands in its own block.
    assert [(b.index, b.text) for b in result.blocks] == [(5, "a"), (2, "b")]
    assert result.text == "ab"


def test_other_candidates_stay_out_of_the_text() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="text"),
        BlockStart(index=1, kind="text", candidate=1),
        BlockStart(index=2, kind="refusal"),
        TextDelta(index=0, delta="zero"),
        TextDelta(index=1, delta="one"),
        TextDelta(index=2, delta="I can't"),
    ]
    result = accumulate(events)
    assert result.text == "zero"
    assert result.refusal == "I can't"
    assert [(b.candidate, b.text) for b in result.blocks] == [
        (0, "zero"),
        (1, "one"),
        (0, "I can't"),
    ]


def test_block_value_is_used_when_no_deltas_arrive() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="text", value="whole"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="server_tool_result", value={"results": [1]}),
        BlockEnd(index=1),
        BlockStart(index=2, kind="text"),
        TextDelta(index=2, delta="delta wins"),
        BlockEnd(index=2, value="restated"),
    ]
    result = accumulate(events)
    assert [b.text for b in result.blocks] == ["whole", None, "delta wins"]
    assert result.blocks[1].value == {"results": [1]}


def test_data_deltas_extend_or_replace() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="image"),
        DataDelta(index=0, delta="AAA", mime_type="image/png"),
        DataDelta(index=0, delta="BBB"),
        DataDelta(index=0, delta="CCC", replace=True),
        DataDelta(index=0, delta="DDD"),
        BlockEnd(index=0),
    ]
    block = accumulate(events).blocks[0]
    assert (block.data, block.mime_type) == ("CCCDDD", "image/png")


# -- event order ----------------------------------------------------------------------------

NEVER_STARTED: list[Event] = [
    TextDelta(index=3, delta="x"),
    ReasoningDelta(index=3, delta="x"),
    ToolInputDelta(index=3, delta="x"),
    DataDelta(index=3, delta="x"),
    SignatureDelta(index=3, delta="x"),
    Citation(index=3, citation={"url": "u"}),
    BlockEnd(index=3),
]


@pytest.mark.parametrize("event", NEVER_STARTED, ids=lambda e: type(e).__name__)
def test_event_for_a_block_never_started(event: Event) -> None:
    acc = Accumulator()
    acc.feed(BlockStart(index=0, kind="text"))
    with pytest.raises(EventOrderError, match="never started"):
        acc.feed(event)


def test_second_block_start_for_the_same_index() -> None:
    acc = Accumulator()
    acc.feed(BlockStart(index=0, kind="text"))
    acc.feed(BlockEnd(index=0))
    with pytest.raises(EventOrderError, match="started twice"):
        acc.feed(BlockStart(index=0, kind="tool_call"))


AFTER_END: list[Event] = [
    TextDelta(index=0, delta="x"),
    ReasoningDelta(index=0, delta="x"),
    ToolInputDelta(index=0, delta="x"),
    DataDelta(index=0, delta="x"),
    BlockEnd(index=0),
]


@pytest.mark.parametrize("event", AFTER_END, ids=lambda e: type(e).__name__)
def test_delta_after_block_end(event: Event) -> None:
    acc = Accumulator()
    acc.feed(BlockStart(index=0, kind="text"))
    acc.feed(BlockEnd(index=0))
    with pytest.raises(EventOrderError, match="after the block ended"):
        acc.feed(event)


def test_second_finish() -> None:
    acc = Accumulator()
    acc.feed(STOP)
    with pytest.raises(EventOrderError):
        acc.feed(STOP)


def test_feed_all_raises_the_same() -> None:
    with pytest.raises(EventOrderError):
        accumulate([TextDelta(index=0, delta="x")])


# -- tool calls -----------------------------------------------------------------------------


def test_tool_arguments_concatenate_and_parse_at_the_end() -> None:
    result = accumulate([*tool_stream('{"ci', 'ty": "Par', 'is", "n": [1, ', "2]}"), STOP])
    (call,) = result.tool_calls
    assert call.arguments == {"city": "Paris", "n": [1, 2]}
    assert call.arguments_json == '{"city": "Paris", "n": [1, 2]}'
    assert (call.id, call.name, call.index, call.error) == ("toolu_1", "get_weather", 0, None)


def test_call_id_wins_over_item_id() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="tool_call", id="fc_1", call_id="call_1", name="f"),
        ToolInputDelta(index=0, delta="{}"),
        BlockEnd(index=0),
    ]
    assert accumulate(events).tool_calls[0].id == "call_1"


@pytest.mark.parametrize("fragments", [(), ("",), ("", ""), (" ", "\n")])
def test_no_argument_tool_gives_an_empty_object(fragments: tuple[str, ...]) -> None:
    (call,) = accumulate([*tool_stream(*fragments), STOP]).tool_calls
    assert call.arguments == {}
    assert call.error is None


def test_arguments_sent_whole_as_an_object() -> None:
    (call,) = accumulate(tool_stream(value={"q": "x"})).tool_calls
    assert call.arguments == {"q": "x"}
    assert call.arguments_json == '{"q":"x"}'


def test_arguments_sent_whole_as_text_at_the_end() -> None:
    events = [*tool_stream(end=False), BlockEnd(index=0, value='{"q": 1}')]
    assert accumulate(events).tool_calls[0].arguments == {"q": 1}


MALFORMED = [
    '{"a": 1}}',
    '{"a" 1}',
    "nope",
    '{"a":1,}',
    "[1 2",
    '{"a": 01}',
    "{'a': 1}",
    '{"a": trux',
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_arguments_are_an_explicit_error(text: str) -> None:
    (call,) = accumulate([*tool_stream(text[:2], text[2:]), STOP]).tool_calls
    assert call.arguments is None  # never {}
    assert call.error is not None
    assert call.error.startswith("invalid JSON")
    assert call.arguments_json == text


CUT_OFF = [
    '{"a": 1',
    '{"city": "Par',
    "[1, 2",
    '{"a": tru',
    '{"a": -',
    '{"a": 1.',
    "{",
    '{"a": "\\',
]


@pytest.mark.parametrize("text", CUT_OFF)
def test_cut_off_arguments_say_incomplete(text: str) -> None:
    (call,) = accumulate([*tool_stream(text), STOP]).tool_calls
    assert call.arguments is None
    assert call.error is not None
    assert call.error.startswith("incomplete JSON")


def test_tool_block_that_never_ended_is_incomplete() -> None:
    result = accumulate(tool_stream('{"a": 1}', end=False))
    (call,) = result.tool_calls
    assert call.arguments is None
    assert call.error is not None and "incomplete" in call.error
    assert result.blocks[0].complete is False


def test_strict_raises_tool_arguments_error() -> None:
    acc = Accumulator(strict=True)
    acc.feed_all([*tool_stream('{"a":', " oops}"), STOP])
    with pytest.raises(ToolArgumentsError) as info:
        acc.result()
    assert info.value.block_index == 0
    assert info.value.arguments == '{"a": oops}'
    assert "invalid" in str(info.value)


def test_strict_accepts_valid_arguments() -> None:
    result = accumulate([*tool_stream('{"a": 1}'), STOP], strict=True)
    assert result.tool_calls[0].arguments == {"a": 1}


def test_server_tool_calls_are_blocks_not_client_tool_calls() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="server_tool_call", id="srv_1", name="web_search"),
        ToolInputDelta(index=0, delta='{"query": "x"}'),
        BlockEnd(index=0),
    ]
    result = accumulate(events)
    assert result.tool_calls == []
    assert result.blocks[0].arguments == {"query": "x"}


def test_parallel_tool_calls_stay_distinct() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="tool_call", id="a", name="f"),
        BlockStart(index=1, kind="tool_call", id="b", name="f"),
        ToolInputDelta(index=1, delta='{"n": '),
        ToolInputDelta(index=0, delta='{"n": '),
        ToolInputDelta(index=0, delta="0}"),
        ToolInputDelta(index=1, delta="1}"),
        BlockEnd(index=1),
        BlockEnd(index=0),
    ]
    calls = accumulate(events).tool_calls
    assert [(c.id, c.arguments) for c in calls] == [("a", {"n": 0}), ("b", {"n": 1})]


def test_arguments_are_parsed_once_at_the_block_end(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = accumulate_module._parse_arguments

    def counting(text: str) -> Any:
        calls.append(text)
        return original(text)

    monkeypatch.setattr(accumulate_module, "_parse_arguments", counting)
    acc = Accumulator()
    acc.feed_all(tool_stream('{"a":', " 1}", end=False))
    assert acc.snapshot.tool_calls[0].arguments is None
    assert calls == []  # not parsed while the block is open
    acc.feed(BlockEnd(index=0))
    assert calls == ['{"a": 1}']  # parsed at the end...
    for _ in range(3):
        assert acc.snapshot.tool_calls[0].arguments == {"a": 1}
    acc.feed(STOP)
    assert acc.result().tool_calls[0].arguments == {"a": 1}
    assert acc.result().tool_calls[0].arguments == {"a": 1}
    assert calls == ['{"a": 1}']  # ...and never again


# -- linear cost (counted, not timed) ----------------------------------------------------------


class CountingStr(str):
    """A delta that counts every ``+`` it takes part in (quadratic ``s += delta``)."""

    additions = 0

    def __add__(self, other: str) -> str:  # type: ignore[override]
        CountingStr.additions += 1
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        CountingStr.additions += 1
        return str.__add__(other, self)


def test_text_and_arguments_are_joined_in_linear_total(monkeypatch: pytest.MonkeyPatch) -> None:
    joined: list[int] = []
    original = accumulate_module._join

    def counting(parts: list[str]) -> str:
        out = original(parts)
        if len(parts) > 1:
            joined.append(len(out))
        return out

    monkeypatch.setattr(accumulate_module, "_join", counting)
    CountingStr.additions = 0
    n = 3000
    piece = CountingStr("0123456789")
    acc = Accumulator()
    acc.feed(BlockStart(index=0, kind="text"))
    acc.feed(BlockStart(index=1, kind="tool_call", id="t", name="f"))
    acc.feed(ToolInputDelta(index=1, delta='{"s": "'))
    for _ in range(n):
        acc.feed(TextDelta(index=0, delta=piece))
        acc.feed(ToolInputDelta(index=1, delta=piece))
    acc.feed(ToolInputDelta(index=1, delta='"}'))
    acc.feed(BlockEnd(index=0))
    acc.feed(BlockEnd(index=1))
    acc.feed(STOP)
    for _ in range(5):
        result = acc.result()
        acc.snapshot  # noqa: B018 - a snapshot after the end costs no new join
    total = 2 * 10 * n + 9
    assert result.text == "0123456789" * n
    assert result.tool_calls[0].arguments == {"s": "0123456789" * n}
    assert CountingStr.additions == 0  # no per-delta concatenation
    # Runs of fragments are folded as they arrive, then each block is joined whole
    # once at its end; the folds copy only new fragments, never earlier folds, so every
    # character is copied at most twice (a re-join of everything would be quadratic).
    assert joined[-2:] == [10 * n, 10 * n + 9]  # the final joins, one per block
    assert sum(joined) <= 2 * total
    assert all(size <= 10 * accumulate_module._FOLD_RUN for size in joined[:-2])


def test_snapshots_mid_stream_do_not_rejoin_what_was_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    joined: list[int] = []
    original = accumulate_module._join

    def counting(parts: list[str]) -> str:
        out = original(parts)
        if len(parts) > 1:
            joined.append(len(parts))
        return out

    monkeypatch.setattr(accumulate_module, "_join", counting)
    acc = Accumulator()
    acc.feed(BlockStart(index=0, kind="text"))
    for i in range(100):
        acc.feed(TextDelta(index=0, delta="x"))
        if i % 10 == 9:
            assert acc.snapshot.text == "x" * (i + 1)
    # Each snapshot joined the previous joined text plus the ten new pieces only.
    assert joined == [10] + [11] * 9


# -- signatures, citations, metadata ----------------------------------------------------------


def test_signatures_concatenate_on_their_block() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="reasoning"),
        ReasoningDelta(index=0, delta="hmm"),
        SignatureDelta(index=0, delta="EqQB"),
        SignatureDelta(index=0, delta="Ckg=="),
        BlockEnd(index=0),
        # Gemini sends the thoughtSignature on a final part, after the content.
        SignatureDelta(index=0, delta="+tail"),
        BlockStart(index=1, kind="text"),
        TextDelta(index=1, delta="ok"),
    ]
    result = accumulate(events)
    assert result.blocks[0].signature == "EqQBCkg==+tail"
    assert result.blocks[1].signature is None


def test_citations_on_blocks_and_on_the_reply() -> None:
    events: list[Event] = [
        BlockStart(index=0, kind="text"),
        Citation(index=0, citation={"url": "a"}),
        Citation(citation={"url": "reply"}),
        BlockEnd(index=0),
        Citation(index=0, citation={"url": "b"}),
    ]
    result = accumulate(events)
    assert result.blocks[0].citations == [{"url": "a"}, {"url": "b"}]
    assert result.citations == [{"url": "a"}, {"url": "reply"}, {"url": "b"}]


def test_metadata_merge_extends_lists() -> None:
    events: list[Event] = [
        Metadata(
            name="grounding",
            value={"groundingChunks": [{"web": 1}], "webSearchQueries": ["q1"], "x": 1},
            merge=True,
        ),
        Metadata(
            name="grounding",
            value={"groundingChunks": [{"web": 2}], "webSearchQueries": ["q2"], "x": 2},
            merge=True,
        ),
        Metadata(name="grounding", value={"groundingSupports": [{"s": 1}]}, merge=True),
        Metadata(name="safety_ratings", value=[{"a": 1}]),
        Metadata(name="safety_ratings", value=[{"b": 2}]),
        Metadata(
            name="grounding", value={"groundingChunks": [{"web": 9}]}, candidate=1, merge=True
        ),
    ]
    result = accumulate(events)
    assert result.metadata == {
        "grounding": {
            "groundingChunks": [{"web": 1}, {"web": 2}],
            "webSearchQueries": ["q1", "q2"],
            "x": 2,
            "groundingSupports": [{"s": 1}],
        },
        "safety_ratings": [{"b": 2}],  # merge=False replaces
        "grounding#1": {"groundingChunks": [{"web": 9}]},
    }
    # The events' own values were not mutated by the merge.
    assert events[0].value["groundingChunks"] == [{"web": 1}]  # type: ignore[attr-defined]


def test_metadata_without_merge_replaces() -> None:
    events: list[Event] = [
        Metadata(name="g", value={"l": [1]}, merge=True),
        Metadata(name="g", value={"l": [2]}),
    ]
    assert accumulate(events).metadata == {"g": {"l": [2]}}


# -- usage ------------------------------------------------------------------------------------


def test_usage_merges_field_by_field_and_empty_never_overwrites() -> None:
    events: list[Event] = [
        UsageUpdate(usage=Usage(input_tokens=10, cache_read_tokens=4, raw={"n": 1})),
        UsageUpdate(usage=Usage(output_tokens=5)),
        UsageUpdate(usage=Usage()),  # a later chunk without usage
        UsageUpdate(usage=Usage(input_tokens=0, output_tokens=0, raw={"zeros": True})),
        UsageUpdate(usage=Usage(output_tokens=7, total_tokens=17)),  # cumulative: wins
        Finish(
            status="completed",
            reason=FinishReason(unified="stop"),
            usage=Usage(reasoning_tokens=2),
        ),
    ]
    usage = accumulate(events).usage
    assert usage == Usage(
        input_tokens=10,
        output_tokens=7,
        reasoning_tokens=2,
        cache_read_tokens=4,
        total_tokens=17,
        raw={"n": 1},
    )


def test_finish_with_empty_usage_keeps_the_earlier_one() -> None:
    events: list[Event] = [
        UsageUpdate(usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7)),
        Finish(status="completed", reason=FinishReason(unified="stop"), usage=Usage()),
    ]
    assert accumulate(events).usage.total_tokens == 7


# -- snapshot, status, errors, warnings -----------------------------------------------------


def test_snapshot_mid_stream() -> None:
    acc = Accumulator()
    acc.feed(StreamStart(dialect="openai_chat"))
    acc.feed(BlockStart(index=0, kind="text"))
    acc.feed(TextDelta(index=0, delta="Hel"))
    first = acc.snapshot
    assert (first.text, first.status, first.finish_reason) == ("Hel", "in_progress", None)
    assert first.blocks[0].complete is False
    acc.feed(TextDelta(index=0, delta="lo"))
    assert acc.snapshot.text == "Hello"
    assert first.text == "Hel"  # an earlier snapshot is not changed afterwards
    assert acc.result().status == "in_progress"
    assert not acc.finished
    acc.feed(BlockEnd(index=0))
    acc.feed(STOP)
    assert acc.finished
    assert (acc.result().status, acc.result().text) == ("completed", "Hello")


def test_result_before_finish_is_in_progress() -> None:
    result = accumulate([StatusUpdate(status="in_progress")])
    assert result.status == "in_progress"
    assert result.finish_reason is None


def test_errors_and_failed_finish() -> None:
    overloaded = ErrorInfo(
        kind="overloaded", message="Overloaded", retryable=True, code="overloaded_error"
    )
    events: list[Event] = [
        ErrorEvent(error=overloaded),
        Finish(status="failed", reason=FinishReason(unified="error"), error=overloaded),
    ]
    result = accumulate(events)
    assert result.status == "failed"
    assert result.error == overloaded
    assert result.errors == [overloaded]  # the same error is not listed twice


def test_first_error_is_the_result_error_without_a_finish_error() -> None:
    first = ErrorInfo(kind="protocol", message="bad json")
    second = ErrorInfo(kind="protocol", message="bad order")
    result = accumulate([ErrorEvent(error=first), ErrorEvent(error=second), STOP])
    assert result.error == first
    assert result.errors == [first, second]


def test_warning_after_finish_reaches_the_result() -> None:
    acc = Accumulator()
    acc.feed(STOP)
    assert acc.result().warnings == []
    acc.feed(Warning(code="after_terminal", message="event after the terminal event"))
    assert [w.code for w in acc.result().warnings] == ["after_terminal"]


def test_unknown_keepalive_and_raw() -> None:
    events: list[Event] = [
        KeepAlive(comment="ping"),
        Raw(dialect="openai_chat", data={"x": 1}),
        Unknown(name="response.new_thing", data="{}"),
        Unknown(data="?"),
    ]
    result = accumulate(events)
    assert result.unknown == 2
    assert result.blocks == []


# -- the Result contract ------------------------------------------------------------------------

RESULT_KEYS = {
    "dialect",
    "id",
    "model",
    "status",
    "finish_reason",
    "text",
    "reasoning",
    "refusal",
    "tool_calls",
    "usage",
    "error",
    "blocks",
    "citations",
    "metadata",
    "warnings",
    "unknown",
}
USAGE_KEYS = [
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "tool_prompt_tokens",
    "audio_input_tokens",
    "audio_output_tokens",
    "total_tokens",
    "raw",
]


def test_to_dict_of_an_empty_result() -> None:
    out = Result().to_dict()
    assert set(out) == RESULT_KEYS
    assert list(out["usage"]) == USAGE_KEYS
    assert out["status"] == "in_progress"
    assert out["finish_reason"] is None


def test_to_dict_exact() -> None:
    events: list[Event] = [
        StreamStart(dialect="anthropic_messages", id="msg_1", model="claude"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="Hi"),
        BlockEnd(index=0),
        BlockStart(index=1, kind="tool_call", id="toolu_1", name="f"),
        ToolInputDelta(index=1, delta='{"a": 1'),
        BlockEnd(index=1),
        UsageUpdate(usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5)),
        Warning(code="sequence_gap", message="gap", event_index=4),
        Finish(
            status="failed",
            reason=FinishReason(unified="error", raw=None),
            error=ErrorInfo(
                kind="overloaded",
                message="Overloaded",
                retryable=True,
                code="overloaded_error",
                http_status=529,
                event_index=7,
                byte_offset=120,
            ),
        ),
    ]
    assert accumulate(events).to_dict() == {
        "dialect": "anthropic_messages",
        "id": "msg_1",
        "model": "claude",
        "status": "failed",
        "finish_reason": {"unified": "error", "raw": None},
        "text": "Hi",
        "reasoning": "",
        "refusal": None,
        "tool_calls": [
            {
                "id": "toolu_1",
                "name": "f",
                "arguments": None,
                "error": "incomplete JSON in tool arguments (cut off before the end)",
            }
        ],
        "usage": {
            "input_tokens": 3,
            "output_tokens": 2,
            "reasoning_tokens": None,
            "cache_read_tokens": None,
            "cache_write_tokens": None,
            "tool_prompt_tokens": None,
            "audio_input_tokens": None,
            "audio_output_tokens": None,
            "total_tokens": 5,
            "raw": None,
        },
        "error": {
            "kind": "overloaded",
            "message": "Overloaded",
            "retryable": True,
            "code": "overloaded_error",
            "http_status": 529,
            "event_index": 7,
            "byte_offset": 120,
        },
        "blocks": [
            {"index": 0, "kind": "text", "text": "Hi", "complete": True},
            {
                "index": 1,
                "kind": "tool_call",
                "id": "toolu_1",
                "name": "f",
                "arguments_json": '{"a": 1',
                "complete": True,
                "error": "incomplete JSON in tool arguments (cut off before the end)",
            },
        ],
        "citations": [],
        "metadata": {},
        "warnings": [{"code": "sequence_gap", "message": "gap"}],
        "unknown": 0,
    }
