"""Shared test helpers: fixtures, snapshots, chunking invariance, native frame views."""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec

from polystream.errors import PolystreamError
from polystream.events import Event, event_to_builtins
from polystream.wire.jsonarray import JSONArrayDecoder
from polystream.wire.sse import SSEComment, SSEDecoder

FIXTURES = Path(__file__).parent / "fixtures"

FAMILIES: dict[str, str] = {
    "openai_responses": "responses",
    "xai_responses": "responses",
    "openai_chat": "chat",
    "xai_chat": "chat",
    "anthropic_messages": "messages",
    "xai_messages": "messages",
    "gemini_interactions": "interactions",
    "gemini_generate": "generate",
    "openai_speech": "speech",
    "openai_transcription": "transcription",
    "openai_images": "images",
    "anthropic_agent_session": "anthropic_agent_session",
    "openai_agent_session": "openai_agent_session",
}
"""Each dialect's family: the dialects whose encoders treat each other's events as
their own."""
STREAM_SUFFIXES = (".sse", ".jsonarray")
UPDATE = os.environ.get("POLYSTREAM_UPDATE_SNAPSHOTS") == "1"


class Incremental(Protocol):
    def feed(self, data: bytes) -> list[Any]: ...
    def close(self) -> list[Any]: ...


def stream_fixtures(dialect: str | None = None) -> list[Path]:
    """Every stream fixture (``tests/fixtures/<dialect>/<case>.sse|.jsonarray``).

    Fixtures under a ``bad/`` subfolder are malformed on purpose and not listed here.
    """
    root = FIXTURES / dialect if dialect else FIXTURES
    return sorted(
        p for p in root.rglob("*") if p.suffix in STREAM_SUFFIXES and "bad" not in p.parts
    )


def fixture_dialect(path: Path) -> str:
    return path.relative_to(FIXTURES).parts[0]


def feed_all(make: Callable[[], Incremental], chunks: Sequence[bytes]) -> list[Any]:
    decoder = make()
    out: list[Any] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


def feed_steps(decoder: Incremental, chunks: Sequence[bytes]) -> tuple[list[Any], list[int], Any]:
    """Feed ``chunks``, then close: the events, how many each call returned (feeds,
    then close), and the error that stopped it (type name, message, event index, byte
    offset) or None."""
    events: list[Any] = []
    counts: list[int] = []
    error = None
    try:
        for chunk in chunks:
            returned = decoder.feed(chunk)
            counts.append(len(returned))
            events += returned
        returned = decoder.close()
        counts.append(len(returned))
        events += returned
    except PolystreamError as exc:
        error = (type(exc).__name__, str(exc), exc.event_index, exc.byte_offset)
    return events, counts, error


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts}) if data else []
    chunks, last = [], 0
    for p in points:
        chunks.append(data[last:p])
        last = p
    chunks.append(data[last:])
    return chunks


def assert_chunking_invariant(
    make: Callable[[], Incremental],
    data: bytes,
    expected: list[Any] | None = None,
    *,
    seeds: int = 20,
) -> list[Any]:
    """Whole input, byte by byte, and random splits must give identical output.

    Returns the output of the whole-input run. (Hypothesis-driven splits live in the
    tests that call this; ``seeds`` extra random splits run here deterministically.)
    """
    whole = feed_all(make, [data])
    if expected is not None:
        assert whole == expected
    bytewise = feed_all(make, [data[i : i + 1] for i in range(len(data))])
    assert bytewise == whole, "byte-by-byte feeding differs from whole input"
    rng = random.Random(len(data))
    for _ in range(seeds):
        cuts = [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 12))]
        assert feed_all(make, split_at(data, cuts)) == whole, f"split at {sorted(cuts)} differs"
    return whole


def native_frames(data: bytes) -> list[Any]:
    """The native view of a stream for round-trip comparison.

    SSE: ``(event name, parsed JSON data or the text)`` per event, comments as
    ``("comment", text)``. JSON array: each element parsed.
    """
    stripped = data.lstrip(b" \t\r\n\xef\xbb\xbf")
    out: list[Any] = []
    if stripped[:1] == b"[":
        dec = JSONArrayDecoder()
        for el in dec.feed(data):
            out.append(msgspec.json.decode(el.data))
        try:
            dec.close()
        except Exception:
            out.append("<unterminated>")
        return out
    sse = SSEDecoder()
    frames = sse.feed(data)
    with contextlib.suppress(Exception):
        frames += sse.close()
    for frame in frames:
        if isinstance(frame, SSEComment):
            out.append(("comment", frame.text))
            continue
        try:
            value: Any = msgspec.json.decode(frame.data)
        except msgspec.DecodeError:
            value = frame.data
        out.append((frame.event, value))
    return out


def events_jsonl(events: list[Event]) -> str:
    return "".join(json.dumps(event_to_builtins(e), sort_keys=True) + "\n" for e in events)


def check_snapshot(path: Path, actual: str) -> None:
    """Compare with a snapshot file; POLYSTREAM_UPDATE_SNAPSHOTS=1 rewrites it."""
    if UPDATE or not path.exists():
        if not UPDATE:
            raise AssertionError(
                f"missing snapshot {path}; run POLYSTREAM_UPDATE_SNAPSHOTS=1 pytest to create it"
            )
        path.write_text(actual)
        return
    assert actual == path.read_text(), f"snapshot {path.name} differs"
