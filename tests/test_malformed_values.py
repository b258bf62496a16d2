"""Well-formed JSON with values of the wrong type or shape: typed errors, never a crash.

A byte mutation mostly breaks the JSON, which each decoder's parser reports. The bugs
that get past that are values that parse but are not what the field holds: an item
``type`` that is an object, a list where a text goes, a candidate index far beyond any
real one. Here every stream fixture is changed that way (a value replaced by another of
another type, removed, a member repeated or removed, seeded so every run is the same)
and read by every layer that consumes it: the decoder with and without its fast paths
(the same events, errors and per-call counts), the accumulator, the dialect's rebuild of
its own final object, and an encoder of its own dialect and of another. Anything but a
:class:`~polystream.errors.PolystreamError` fails.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from polystream.accumulate import Accumulator
from polystream.dialects import DIALECTS, get_dialect
from polystream.errors import LocalProtocolError, PolystreamError
from polystream.events import (
    BlockEnd,
    BlockStart,
    StreamStart,
    TextDelta,
    dump_event,
)
from tests.helpers import FIXTURES, feed_steps, fixture_dialect, stream_fixtures

# Values of every JSON type, and the ones that tend to break code that trusts a field:
# huge and non-finite numbers, a lone surrogate, a NUL, deep nesting, empty text.
REPLACEMENTS = [
    b"",
    b"null",
    b'""',
    b"0",
    b"-1",
    b"1e999",
    b"{}",
    b"[]",
    b'"x"',
    b"true",
    b"1.5",
    b"123456789012345678901234567890",
    b'"\\u0000"',
    b'"\\ud800"',
    b"[[[[[[[[1]]]]]]]]",
    b'{"a":{"b":{"c":1}}}',
    b'["x", 1]',
    b"false",
]


def _value_span(data: bytes, at: int) -> tuple[int, int] | None:
    """Where the JSON value that begins at or after ``at`` (after blanks) starts and ends."""
    n = len(data)
    while at < n and data[at] in b" \t\r\n":
        at += 1
    if at >= n:
        return None
    first = data[at]
    if first == 0x22:  # a string
        end = at + 1
        while end < n:
            if data[end] == 0x5C:
                end += 2
            elif data[end] == 0x22:
                return at, end + 1
            else:
                end += 1
        return None
    if first in b"{[":
        depth, end, inside = 0, at, False
        while end < n:
            byte = data[end]
            if inside:
                if byte == 0x5C:
                    end += 1
                elif byte == 0x22:
                    inside = False
            elif byte == 0x22:
                inside = True
            elif byte in b"{[":
                depth += 1
            elif byte in b"}]":
                depth -= 1
                if depth == 0:
                    return at, end + 1
            end += 1
        return None
    end = at
    while end < n and data[end] not in b",}] \t\r\n":
        end += 1
    return at, end


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One change to one member of one JSON object in ``data``: its value replaced (or
    removed), the member repeated, or the member removed."""
    keys = [i for i in range(len(data) - 1) if data[i] == 0x22 and data[i + 1] == 0x3A]
    if not keys:
        return data
    key_end = rng.choice(keys)
    span = _value_span(data, key_end + 2)
    if span is None:
        return data
    start, end = span
    roll = rng.random()
    if roll < 0.7:
        return data[:start] + rng.choice(REPLACEMENTS) + data[end:]
    key_start = data.rfind(b'"', 0, key_end)
    if key_start < 0:
        return data
    if roll < 0.85:
        return data[:end] + b"," + data[key_start:end] + data[end:]
    if data[end : end + 1] == b",":
        return data[:key_start] + data[end + 1 :]
    return data[:key_start] + data[end:]


def pieces(rng: random.Random, data: bytes) -> list[bytes]:
    size = rng.choice([1, 7, 61, 301, 4096, len(data) + 1])
    if size == 1 and len(data) > 5000:
        size = 7
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


def decode(dialect: str, chunks: list[bytes], fast: bool, strict: bool) -> Any:
    """The events, how many each call returned, and the error that stopped it."""
    decoder = get_dialect(dialect).decoder(strict=strict)
    decoder._fast_paths = fast  # type: ignore[attr-defined]
    return feed_steps(decoder, chunks)


def consume(dialect: str, events: list[Any], strict: bool, target: str) -> None:
    """Every layer after the decoder. A typed error ends a layer's step, as it would
    for a caller; any other exception goes through, and fails the test."""
    with contextlib.suppress(PolystreamError):
        accumulator = Accumulator(strict=strict)
        for event in events:
            accumulator.feed(event)
        accumulator.result()
    with contextlib.suppress(PolystreamError):
        get_dialect(dialect).rebuild(events)
    for name in {dialect, target}:
        with contextlib.suppress(PolystreamError):
            encoder = get_dialect(name).encoder()
            for event in events:
                encoder.encode(event)
            encoder.close()


FIXTURE_PATHS = stream_fixtures()


@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_values_of_the_wrong_type(path: Path) -> None:
    dialect = fixture_dialect(path)
    data = path.read_bytes()
    rng = random.Random(str(path.relative_to(FIXTURES)))
    targets = sorted(DIALECTS)
    for _ in range(6):
        changed = data
        for _ in range(rng.randint(1, 3)):
            changed = mutate(rng, changed)
        chunks = pieces(rng, changed)
        strict = rng.random() < 0.5
        fast = decode(dialect, chunks, True, strict)
        general = decode(dialect, chunks, False, strict)
        assert [dump_event(e) for e in fast[0]] == [dump_event(e) for e in general[0]]
        assert fast[1:] == general[1:]
        consume(dialect, fast[0], strict, rng.choice(targets))


# -- the cases the sweep found, each on its own -------------------------------------------


def _sse(*events: tuple[str, str]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


_CREATED = (
    '{"type":"response.created","sequence_number":0,"response":{"id":"resp_1",'
    '"object":"response","status":"in_progress","model":"gpt-5","output":[]}}'
)


@pytest.mark.parametrize("strict", [True, False])
def test_an_output_item_type_that_is_not_a_string(strict: bool) -> None:
    # (It was looked up in a set: TypeError, unhashable.)
    data = _sse(
        ("response.created", _CREATED),
        (
            "response.output_item.added",
            '{"type":"response.output_item.added","sequence_number":1,"output_index":0,'
            '"item":{"id":"msg_1","type":{"a":1},"status":"in_progress"}}',
        ),
    )
    events, _, error = decode("openai_responses", [data], True, strict)
    message = "output item type {'a': 1} is not a string"
    if strict:
        assert error == (
            "RemoteProtocolError",
            f"{message} (dialect openai_responses, event 1, byte 177)",
            1,
            177,
        )
    else:
        assert error is None
        assert [type(e).__name__ for e in events] == ["StreamStart", "ErrorEvent", "Finish"]
        assert events[1].error.kind == "protocol"
        assert events[1].error.message == message
        assert (events[1].error.event_index, events[1].error.byte_offset) == (1, 177)
        assert events[2].status == "truncated"


def test_a_reasoning_summary_that_is_not_a_list() -> None:
    # (Its parts were iterated: TypeError, 'float' object is not iterable.)
    data = _sse(
        ("response.created", _CREATED),
        (
            "response.output_item.added",
            '{"type":"response.output_item.added","sequence_number":1,"output_index":0,'
            '"item":{"id":"rs_1","type":"reasoning","summary":[]}}',
        ),
        (
            "response.output_item.done",
            '{"type":"response.output_item.done","sequence_number":2,"output_index":0,'
            '"item":{"id":"rs_1","type":"reasoning","summary":1.5}}',
        ),
    )
    events, _, error = decode("openai_responses", [data], True, False)
    assert error is None
    ends = [e for e in events if isinstance(e, BlockEnd)]
    assert len(ends) == 1
    assert ends[0].value == ""


def test_a_choice_index_beyond_what_a_chat_stream_opens() -> None:
    # A Gemini candidate index of 10**30 made the Chat encoder open every choice below
    # it, one chunk each: it never finished.
    start = StreamStart(dialect="gemini_generate", model="m")
    encoder = get_dialect("openai_chat").encoder()
    encoder.encode(start)
    with pytest.raises(LocalProtocolError, match=r"choice index 1024 out of range \(0 to 1023\)"):
        encoder.encode(BlockStart(index=0, kind="text", candidate=1024))
        encoder.encode(TextDelta(index=0, delta="x"))
    # The last one it opens: every choice below it first, in order.
    encoder = get_dialect("openai_chat").encoder()
    data = encoder.encode(start)
    data += encoder.encode(BlockStart(index=0, kind="text", candidate=1023))
    data += encoder.encode(TextDelta(index=0, delta="x"))
    assert data.count(b'"role":"assistant"') == 1024
    assert data.count(b'"content":"x"') == 1


def test_the_anthropic_rebuild_skips_values_of_another_type() -> None:
    # message_start's content a number, a text delta's text a number, the usage so far
    # a number when message_delta's came: each was a TypeError or ValueError.
    data = _sse(
        (
            "message_start",
            '{"type":"message_start","message":{"id":"msg_1","type":"message",'
            '"role":"assistant","model":"claude","content":7,"stop_reason":null,'
            '"usage":5}}',
        ),
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        ),
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":3}}',
        ),
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}',
        ),
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":[0],"delta":{"type":"text_delta","text":"!"}}',
        ),
        ("content_block_stop", '{"type":"content_block_stop","index":0}'),
        (
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},'
            '"usage":{"output_tokens":2}}',
        ),
        ("message_stop", '{"type":"message_stop"}'),
    )
    events, _, error = decode("anthropic_messages", [data], True, False)
    assert error is None
    message = get_dialect("anthropic_messages").rebuild(events)
    assert message["content"] == [{"type": "text", "text": "ok"}]
    assert message["usage"] == {"output_tokens": 2}
    assert message["stop_reason"] == "end_turn"


def test_the_sweep_reads_every_dialect() -> None:
    assert {fixture_dialect(p) for p in FIXTURE_PATHS} == set(DIALECTS)
