"""The gateway's cursor splitter on generated streams: every SSE event (LF, CRLF or CR
line ends, comments, data on one line or two, payloads that are no JSON object) gets
the cursor its dialect's rule gives, the bytes a client re-reads as the same event, and
the same entries whatever the chunking (whole, byte by byte, random cuts)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.gateway_core import SSECursorSplitter
from polystream.wire.sse import ServerSentEvent, SSEComment, SSEDecoder
from tests.helpers import split_at

DIALECTS = ("anthropic_messages", "openai_chat", "gemini_generate", "openai_responses")
DIALECTS += ("gemini_interactions",)


@dataclass(frozen=True)
class Block:
    """One SSE event as written, and what its cursor rule reads from it."""

    raw: bytes
    comment: bool
    event: str | None
    data: str
    payload: Any  # the decoded JSON of the data, or None when it is no JSON object


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_ID = st.text("abcxyz_0123456789", min_size=1, max_size=8)


@st.composite
def _payloads(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["object", "object", "object", "done", "text", "array"]))
    if kind == "done":
        return "[DONE]", None
    if kind == "text":
        return draw(st.sampled_from(["not json", "{", "event: x", "data: y"])), None
    if kind == "array":
        return "[1, 2]", None
    obj: dict[str, Any] = {"type": draw(_TEXT)}
    if draw(st.booleans()):
        obj["sequence_number"] = draw(st.integers(0, 10**6))
    if draw(st.booleans()):
        obj["event_id"] = draw(st.one_of(_ID, st.integers(0, 9)))
    for key in ("response", "interaction"):
        if draw(st.integers(0, 3)) == 0:
            obj[key] = draw(
                st.one_of(
                    st.builds(lambda i: {"id": i, "status": "in_progress"}, _ID),
                    st.builds(lambda i: {"id": i}, st.integers(0, 9)),
                    st.just([]),
                    st.just(None),
                )
            )
    obj["text"] = draw(_TEXT)  # may hold "data:", quotes, escaped line breaks
    if draw(st.booleans()):
        obj = dict(reversed(list(obj.items())))
    return json.dumps(obj, ensure_ascii=draw(st.booleans())), obj


@st.composite
def _blocks(draw: st.DrawFn, newline: bytes) -> Block:
    nl = newline
    if draw(st.integers(0, 5)) == 0:
        return Block(b": keep-alive" + nl + nl, True, None, "", None)
    data, payload = draw(_payloads())
    event = draw(st.one_of(st.none(), st.sampled_from(["delta", "response.created"])))
    raw = b"" if event is None else b"event: " + event.encode() + nl
    # The data on one line, or cut in two lines where the JSON stays the same object
    # when they are joined by a line break (as an SSE reader joins them).
    cut = draw(st.integers(0, len(data))) if draw(st.booleans()) else len(data)
    lines = [data[:cut], data[cut:]] if 0 < cut < len(data) else [data]
    if len(lines) == 2 and payload is not None:
        try:
            joined_ok = json.loads("\n".join(lines)) == payload
        except ValueError:
            joined_ok = False
        if not joined_ok:
            lines = [data]
    raw += b"".join(b"data: " + line.encode() + nl for line in lines) + nl
    return Block(raw, False, event, "\n".join(lines), payload)


@st.composite
def _streams(draw: st.DrawFn) -> tuple[bytes, list[Block]]:
    newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    blocks = draw(st.lists(_blocks(newline), min_size=1, max_size=8))
    return newline, blocks


def _expected(dialect: str, blocks: list[Block], nl: bytes) -> tuple[list[tuple[str, bytes]], Any]:
    """Each block's entry by the dialect's rule, and the stream's native id."""
    entries: list[tuple[str, bytes]] = []
    native: str | None = None
    for n, block in enumerate(blocks, 1):
        obj = block.payload if type(block.payload) is dict else {}
        key = "response" if dialect == "openai_responses" else "interaction"
        named = obj.get(key)
        if (
            native is None
            and dialect in ("openai_responses", "gemini_interactions")
            and type(named) is dict
            and type(named.get("id")) is str
        ):
            native = named["id"]
        if dialect == "openai_responses":
            seq = obj.get("sequence_number")
            entries.append((str(seq) if type(seq) is int else f"x{n}", block.raw))
        elif dialect == "gemini_interactions":
            event_id = obj.get("event_id")
            entries.append((event_id if type(event_id) is str else f"x{n}", block.raw))
        elif dialect == "gemini_generate" or block.comment:
            entries.append((f"s.{n}", block.raw))
        else:
            entries.append((f"s.{n}", f"id: s.{n}".encode() + nl + block.raw))
    return entries, native


def _split(dialect: str, chunks: list[bytes]) -> tuple[list[tuple[str, bytes]], str | None]:
    splitter = SSECursorSplitter(dialect, "s")
    entries = [entry for chunk in chunks for entry in splitter.split(chunk)]
    return entries, splitter.native_id


@settings(max_examples=300, deadline=None)
@given(_streams(), st.sampled_from(DIALECTS), st.randoms(use_true_random=False))
def test_entries_by_the_dialects_rule_whatever_the_chunking(
    stream: tuple[bytes, list[Block]], dialect: str, rng: random.Random
) -> None:
    newline, blocks = stream
    body = b"".join(block.raw for block in blocks)
    expected = _expected(dialect, blocks, newline)
    assert _split(dialect, [body]) == expected
    assert _split(dialect, [body[i : i + 1] for i in range(len(body))]) == expected
    for _ in range(3):
        cuts = [rng.randrange(len(body) + 1) for _ in range(rng.randrange(1, 6))]
        assert _split(dialect, [*split_at(body, cuts), b""]) == expected
    # What a client reads back: the same events, each with its cursor as its id where
    # the dialect writes one.
    out = b"".join(data for _, data in expected[0])
    frames = SSEDecoder().feed(out)
    seen = [f for f in frames if type(f) is ServerSentEvent]
    events = [block for block in blocks if not block.comment]
    assert [(f.event, f.data) for f in seen] == [(b.event, b.data) for b in events]
    assert len([f for f in frames if type(f) is SSEComment]) == len(blocks) - len(events)
    if dialect in ("anthropic_messages", "openai_chat"):
        ids = [cursor for (cursor, _), b in zip(expected[0], blocks, strict=True) if not b.comment]
        assert [f.id for f in seen] == ids


def test_a_stream_named_by_its_first_object_id_only() -> None:
    stream = (
        b'data: {"response":null,"sequence_number":0}\n\n'
        b'data: {"response":[],"sequence_number":1}\n\n'
        b'data: {"response":{"id":7},"sequence_number":2}\n\n'
        b'data: {"sequence_number":3,"response":{"status":"x","id":"resp_2"}}\n\n'
        b'data: {"response":{"id":"resp_3"},"sequence_number":4}\n\n'
    )
    splitter = SSECursorSplitter("openai_responses", "s")
    assert [c for c, _ in splitter.split(stream)] == ["0", "1", "2", "3", "4"]
    assert splitter.native_id == "resp_2"


def test_cursors_of_events_whose_data_is_cut_over_lines() -> None:
    stream = (
        b'event: e\ndata: {"sequence_number"\ndata: :5}\n\n'
        b'data: {"sequence_number":6}\r\n\r\n'  # CRLF: the data line keeps its CR
        b"data: [DONE]\n\n"
        b'data: {"sequence_number":true}\n\n'  # no number: the counter
    )
    splitter = SSECursorSplitter("openai_responses", "s")
    assert [c for c, _ in splitter.split(stream)] == ["5", "6", "x3", "x4"]
