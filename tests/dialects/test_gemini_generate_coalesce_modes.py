"""The decoders' public fast-path option (``coalesce``): each mode leaves an accumulator
with the result ``"off"`` gives, on every Gemini fixture and on long streams, in random
chunkings; a mode a decoder has no fast path for is ``"off``; anything else is refused.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

import polystream
from polystream.accumulate import accumulate
from polystream.decoding import StreamDecoder
from polystream.dialects import DIALECTS, get_dialect
from polystream.dialects._base import Coalesce, UsageRun
from polystream.dialects.gemini_generate import Decoder
from polystream.errors import LocalProtocolError
from polystream.events import TextDelta, UsageUpdate
from tests.dialects.test_gemini_generate_fast import array, last, sse, usual
from tests.helpers import feed_steps, split_at, stream_fixtures

MODES: list[Coalesce] = ["result", "usage", "usage_texts"]


def chunkings(data: bytes, seed: int) -> list[list[bytes]]:
    """``data`` whole, in pieces of 7 bytes, and in three random chunkings."""
    rng = random.Random(seed)
    cuts = [[rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 40))] for _ in range(3)]
    return [[data], [data[i : i + 7] for i in range(0, len(data), 7)]] + [
        split_at(data, points) for points in cuts
    ]


def decoded(mode: Coalesce, feeds: list[bytes], strict: bool) -> tuple[Any, Any, list[Any]]:
    """The result the events give (JSON) or the error, and the events."""
    decoder = Decoder(coalesce=mode, strict=strict)
    assert decoder.coalesce == mode
    events, _, error = feed_steps(decoder, feeds)
    if error is not None:
        return None, error, events
    return msgspec.json.encode(accumulate(events).to_dict()), None, events


def long_stream(framing: str) -> bytes:
    chunks = [usual(f" w{i}", i) for i in range(1, 120)] + [last(120)]
    return array(chunks) if framing == "array" else sse(chunks)


@pytest.mark.parametrize(
    "path",
    [*stream_fixtures("gemini_generate"), "long.sse", "long.jsonarray"],
    ids=lambda p: p if isinstance(p, str) else p.name,
)
@pytest.mark.parametrize("strict", [False, True])
def test_each_mode_accumulates_as_off(path: Path | str, strict: bool) -> None:
    if isinstance(path, str):
        data = long_stream("sse" if path.endswith(".sse") else "array")
    else:
        data = path.read_bytes()
    for seed, feeds in enumerate(chunkings(data, len(data))):
        expected = decoded("off", feeds, strict)
        for mode in MODES:
            got = decoded(mode, feeds, strict)
            assert got[:2] == expected[:2], (mode, seed)


@pytest.mark.parametrize("framing", ["sse", "array"])
def test_each_mode_gives_fewer_events_on_a_long_stream(framing: str) -> None:
    # (So that the comparison above compares fast paths that were taken.)
    data = long_stream(framing)
    every = decoded("off", [data], False)[2]
    result = decoded("result", [data], False)[2]
    texts = sum(type(e) is TextDelta for e in every)
    assert sum(type(e) is TextDelta for e in result) < texts
    for mode in ("usage", "usage_texts"):
        events = decoded(mode, [data], False)[2]
        assert sum(type(e) is TextDelta for e in events) == texts
        assert sum(type(e) is UsageUpdate for e in events) < sum(
            type(e) is UsageUpdate for e in every
        )


@pytest.mark.parametrize("mode", MODES)
def test_runs_are_noted_only_for_the_usage_modes(mode: Coalesce) -> None:
    decoder = Decoder(coalesce=mode)
    events = decoder.feed(long_stream("sse"))
    runs = decoder.take_runs()
    if mode == "result":
        assert runs == []
        return
    [run] = runs
    assert type(run) is UsageRun and type(events[run.event]) is UsageUpdate
    assert (run.texts is not None) is (mode == "usage_texts")


def test_a_mode_without_a_fast_path_is_off() -> None:
    for name in DIALECTS:
        for mode in get_args(Coalesce):
            decoder = get_dialect(name).decoder(coalesce=mode)
            expected = mode if name == "gemini_generate" else "off"
            assert decoder.coalesce == expected, (name, mode)
            assert decoder.take_runs() == []
    stream = StreamDecoder("openai_chat", coalesce="result")
    assert stream.coalesce == "result"
    assert stream.dialect_decoder is not None
    assert stream.dialect_decoder.coalesce == "off"
    # Through auto-detection, the mode reaches the decoder made once the dialect is known.
    auto = StreamDecoder(coalesce="usage")
    assert auto.dialect_decoder is None and auto.take_runs() == []
    auto.feed(long_stream("array"))
    assert auto.dialect_decoder is not None and auto.dialect_decoder.coalesce == "usage"
    assert len(auto.take_runs()) == 1


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(LocalProtocolError) as caught:
        Decoder(coalesce="usage_text")  # type: ignore[arg-type]
    assert caught.value.message == (
        "coalesce must be one of off, result, usage, usage_texts (got 'usage_text')"
    )
    assert caught.value.dialect == "gemini_generate"
    with pytest.raises(LocalProtocolError):
        get_dialect("openai_chat").decoder(coalesce=True)


def test_a_stream_decoder_refuses_an_unknown_mode_at_once() -> None:
    # (Before the dialect is known: the mode is checked when the decoder is made.)
    with pytest.raises(LocalProtocolError) as caught:
        StreamDecoder(coalesce="all")  # type: ignore[arg-type]
    assert caught.value.message == (
        "coalesce must be one of off, result, usage, usage_texts (got 'all')"
    )


def test_decode_may_be_asked_for_every_event() -> None:
    data = long_stream("sse")
    assert polystream.decode(data, coalesce="off") == polystream.decode(data)
