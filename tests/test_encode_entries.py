"""Each SSE event an encoder writes, with its resume cursor (``encode_entries``): for
every stream fixture transcoded into every SSE dialect, the entries and the native id
are those the cursor splitter reads back from the encoder's whole output, entry for
entry and byte for byte, however the events come in batches. (The gateway journals
these entries: a journal written before must read the same.)"""

from __future__ import annotations

import itertools
import random
import types
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import polystream.dialects._chat._foreign as chat_encode
import polystream.dialects._messages.encode as messages_encode
from polystream.dialects import DIALECTS, _cursors, get_dialect
from polystream.dialects._cursors import CursorSplitter
from polystream.events import ErrorEvent, Event, KeepAlive, Unknown

from .helpers import fixture_dialect, stream_fixtures

FIXTURES = stream_fixtures()
STREAM_ID = "0123456789abcdef0123456789abcdef"
TARGETS = [d for d in DIALECTS if get_dialect(d).encoder().content_type == "text/event-stream"]


@pytest.fixture
def same_ids(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """The ids an encoder mints at random (Messages', Chat's) made the same sequence in
    every encoder run (each run starts it over), so that two runs write the same bytes."""
    counter = itertools.count()

    def restart() -> None:
        nonlocal counter
        counter = itertools.count()

    fake_secrets = types.SimpleNamespace(token_urlsafe=lambda n: f"{next(counter):024d}")
    fake_uuid = types.SimpleNamespace(uuid4=lambda: uuid.UUID(int=next(counter)))
    monkeypatch.setattr(messages_encode, "secrets", fake_secrets)
    monkeypatch.setattr(chat_encode, "uuid", fake_uuid)
    return restart


def _passed_through(event: Event) -> bool:
    """A keep-alive, an unknown event, an error that is a source event not read."""
    if type(event) is ErrorEvent:
        return event.error.kind == "protocol"
    return type(event) is KeepAlive or type(event) is Unknown


def _events(path: Path) -> list[Event]:
    decoder = get_dialect(fixture_dialect(path)).decoder()
    return [*decoder.feed(path.read_bytes()), *decoder.close()]


def _oracle(
    target: str, events: list[Event], restart: Callable[[], None]
) -> tuple[list[tuple[str, bytes]], str | None]:
    """What the splitter reads from the encoder's whole output."""
    restart()
    encoder = get_dialect(target).encoder()
    data = encoder.encode_all(events)
    splitter = CursorSplitter(target, STREAM_ID)
    return splitter.split(data), splitter.native_id


def _entries(
    target: str, events: list[Event], seed: int, restart: Callable[[], None] = lambda: None
) -> tuple[list[tuple[str, bytes]], str | None]:
    """What ``encode_entries`` gives over random batches of the events (some empty)."""
    rng = random.Random(seed)
    restart()
    encoder = get_dialect(target).encoder()
    encoder.stream_id = STREAM_ID
    entries: list[tuple[str, bytes]] = []
    at = 0
    while at < len(events):
        size = rng.choice((0, 1, 1, 2, 3, 7))
        entries += encoder.encode_entries(events[at : at + size])
        at += size
    entries += encoder.encode_entries([], close=True)
    return entries, encoder.native_id


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_encode_entries_equal_the_splitters_reading(
    path: Path, target: str, same_ids: Callable[[], None]
) -> None:
    events = _events(path)
    expected = _oracle(target, events, same_ids)
    for seed in range(3):
        assert _entries(target, events, seed, same_ids) == expected


@pytest.mark.parametrize("target", TARGETS)
def test_keep_alives_between_events_take_their_cursors_too(
    target: str, same_ids: Callable[[], None]
) -> None:
    """Keep-alives (written as comments or ``ping`` events) between a fixture's events
    count as events of their own."""
    path = next(p for p in FIXTURES if fixture_dialect(p) == "anthropic_messages")
    events: list[Event] = []
    for i, event in enumerate(_events(path)):
        events.append(event)
        if i % 3 == 1:
            events.append(KeepAlive(comment="keep-alive"))
    expected = _oracle(target, events, same_ids)
    assert len(expected[0]) > 0
    assert _entries(target, events, 7, same_ids) == expected


def test_counter_cursors_carry_the_id_line() -> None:
    """A counter dialect's entry is ``<stream>.<n>`` and its bytes begin with the
    ``id:`` line a resuming client sends back."""
    path = next(p for p in FIXTURES if fixture_dialect(p) == "openai_chat")
    entries, native = _entries("anthropic_messages", _events(path), 0)
    assert native is None
    for n, (cursor, data) in enumerate(entries, 1):
        assert cursor == f"{STREAM_ID}.{n}"
        assert data.startswith(f"id: {STREAM_ID}.{n}\n".encode())


@pytest.mark.parametrize(
    "target",
    [
        "openai_responses",
        "xai_responses",
        "gemini_interactions",
        "anthropic_messages",
        "xai_messages",
    ],
)
def test_encoders_that_mark_their_events_read_none_back(
    target: str, same_ids: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Responses, Interactions and Messages encoders mark each event as they write
    it: no event's JSON is read back, nor the output searched for the events' ends.
    (Not so for what the encoders pass through as it came, whose cursors they do not
    know: unknown events, the raw events of errors; nor for keep-alives: a comment with
    no blank line of its own joins the next event, which is then read as the splitter
    reads it.)"""
    streams = []
    for path in FIXTURES:
        events = [e for e in _events(path) if not _passed_through(e)]
        streams.append((events, _oracle(target, events, same_ids)))

    def no_reading(block: bytes) -> None:
        raise AssertionError(f"an event read back: {block[:80]!r}")

    monkeypatch.setattr(_cursors, "read_cursors", no_reading)
    monkeypatch.setattr(_cursors, "event_blocks", no_reading)
    for events, expected in streams:
        assert _entries(target, events, 1, same_ids) == expected
