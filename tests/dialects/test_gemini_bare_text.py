"""Gemini: bare JSON error text inside an SSE stream gives the same events, in the
same order, whatever the chunking, in strict and tolerant mode.

Google writes a bare (not ``data:``-prefixed) JSON error object into an SSE stream
when a stream fails after HTTP 200 (see ``tests/fixtures/gemini_generate/error_bare.sse``).
The SSE layer reads those lines as unknown fields of the event they fall in, so the
order of the bare text and of that event's ``data`` line must come from their byte
positions, not from where the chunks happen to end.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.dialects import get_dialect
from polystream.errors import PolystreamError, RemoteProtocolError
from polystream.events import event_to_builtins

FIXTURE = Path(__file__).parent.parent / "fixtures" / "gemini_generate" / "error_bare.sse"
BASE = FIXTURE.read_bytes()
FIRST = BASE.split(b"\r\n\r\n")[0] + b"\r\n\r\n"  # the fixture's first chunk, whole
ERROR = b'{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}'

# name -> (body, event types when tolerant, event types before the error when strict)
CASES: dict[str, bytes] = {
    # the bare text, then another chunk: the bare error comes first
    "then_data": BASE + FIRST,
    # the bare text inside an event, after its data line: the data comes first
    "inside": FIRST[:-2] + ERROR + b"\r\n\r\n" + FIRST,
    # the bare text right before a data line, no blank line between them
    "before_data": FIRST + ERROR + b"\r\n" + FIRST,
    "not_json": FIRST + b"hello world\n",
    "garbage_after": BASE + b"xx\n",
    "unterminated": BASE + b"xx",
    "truncated_object": FIRST + b'{\n  "error": {\n',
    # bare text in an event that dispatches nothing, then several chunks: its event
    # index is that of the chunk after it, not a count of what one feed dispatched
    "inside_empty_event": b'd{\n  "error": {"code": 503}\n}\nata: x\r\n\r\n' + FIRST * 3,
}

EXPECTED_TOLERANT = {
    "then_data": [
        "stream-start", "block-start", "text-delta", "usage",
        "error", "usage", "text-delta", "usage", "finish",
    ],
    "inside": [
        "stream-start", "block-start", "text-delta", "usage",
        "error", "usage", "text-delta", "usage", "finish",
    ],
    "before_data": [
        "stream-start", "block-start", "text-delta", "usage",
        "error", "usage", "text-delta", "usage", "finish",
    ],
}  # fmt: skip


def _run(body: bytes, cuts: list[int], strict: bool) -> tuple[list[Any], str | None]:
    decoder = get_dialect("gemini_generate").decoder(strict=strict)
    out: list[Any] = []
    error = None
    last = 0
    try:
        for cut in [*cuts, len(body)]:
            out.extend(decoder.feed(body[last:cut]))
            last = cut
        out.extend(decoder.close())
    except PolystreamError as exc:
        assert isinstance(exc, RemoteProtocolError)
        error = f"{exc.message} @ {exc.event_index}/{exc.byte_offset}"
    return [event_to_builtins(e) for e in out], error


@pytest.mark.parametrize("strict", [False, True], ids=["tolerant", "strict"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_bare_text_events_do_not_depend_on_chunking(name: str, strict: bool) -> None:
    body = CASES[name]
    whole = _run(body, [], strict)
    assert _run(body, list(range(1, len(body))), strict) == whole, "byte by byte"
    for cut in range(1, len(body)):
        assert _run(body, [cut], strict) == whole, f"split at {cut}"
    rng = random.Random(name)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(2, 8)))
        assert _run(body, cuts, strict) == whole, f"split at {cuts}"
    if not strict and name in EXPECTED_TOLERANT:
        assert [e["type"] for e in whole[0]] == EXPECTED_TOLERANT[name]
        assert whole[1] is None


def test_bare_error_inside_an_event_comes_after_its_data_line() -> None:
    events, _ = _run(CASES["inside"], [], strict=False)
    kinds = [e["type"] for e in events]
    error = events[kinds.index("error")]
    assert error["error"]["message"] == "overloaded"
    assert kinds.index("error") > kinds.index("text-delta")


def test_strict_error_in_bare_text_keeps_the_events_before_it() -> None:
    # The events decoded before the bad bare text are returned; the error follows.
    for name in ("not_json", "garbage_after", "truncated_object"):
        events, error = _run(CASES[name], [], strict=True)
        assert error is not None and "malformed JSON" in error, name
        assert [e["type"] for e in events][:4] == [
            "stream-start",
            "block-start",
            "text-delta",
            "usage",
        ], name


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(CASES)),
    strict=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=10),
)
def test_bare_text_random_splits(name: str, strict: bool, cuts: list[int]) -> None:
    body = CASES[name]
    points = sorted({c % len(body) for c in cuts} - {0})
    assert _run(body, points, strict) == _run(body, [], strict)


def test_bare_text_is_located_before_the_event_after_it() -> None:
    # A bare text's event index is that of the event after it: 0 for the first one
    # (none was dispatched before it). The second ("}" and the "ata: x" line, whose
    # braces never balance) ends only at close, after the three events.
    events, _ = _run(CASES["inside_empty_event"], [], strict=False)
    errors = [e["error"] for e in events if e["type"] == "error"]
    assert [(e["event_index"], e["byte_offset"]) for e in errors] == [(0, 3), (3, 28)]


@pytest.mark.parametrize("strict", [False, True])
def test_bare_text_that_never_balances_is_bounded_by_the_event_limit(strict: bool) -> None:
    # Bare lines are kept until their braces balance. Text that never balances (an
    # opened object, then lines forever) must hit max_event_size like an SSE event,
    # and the stream stays failed.
    from polystream.errors import BufferLimitExceeded

    decoder = get_dialect("gemini_generate").decoder(
        framing="sse", strict=strict, max_event_size=4096
    )
    assert decoder.feed(FIRST) != []
    start = len(FIRST)
    fed = 0
    with pytest.raises(BufferLimitExceeded) as info:
        for _ in range(1000):
            decoder.feed(b'{\n  "x": 1,\n')
            fed += 12
    assert fed < 4096
    assert info.value.byte_offset == start
    assert info.value.dialect == "gemini_generate"
    assert "bare text larger than max_event_size=4096 bytes" in str(info.value)
    with pytest.raises(BufferLimitExceeded):
        decoder.feed(b"}\n")
    with pytest.raises(BufferLimitExceeded):
        decoder.close()  # as after an SSE line over its limit: never a clean end


def test_a_bare_text_of_many_short_lines_reads_whole() -> None:
    # Past the framers' join of many pieces (wire._pieces), the text is unchanged.
    lines = b"".join(b'  "k%d": %d,\n' % (i, i) for i in range(3000))
    body = FIRST + b'{"error": {\n' + lines + b'  "code": 503, "status": "UNAVAILABLE"}}\n'
    whole = get_dialect("gemini_generate").decoder(framing="sse")
    expected = [event_to_builtins(e) for e in whole.feed(body) + whole.close()]
    trickled = get_dialect("gemini_generate").decoder(framing="sse")
    events = []
    for at in range(0, len(body), 7):
        events += trickled.feed(body[at : at + 7])
    events += trickled.close()
    assert [event_to_builtins(e) for e in events] == expected
    assert any(e["type"] == "error" for e in expected)
