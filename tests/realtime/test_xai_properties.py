"""Interleavings and splits of the xAI sockets: a Voice Agent response found by its call
id or item gives the same events whatever runs beside it; a speech-to-text channel's
transcript does not depend on the other channels'; audio splits into whole frames."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.audio import AudioFormat
from polystream.dialects._realtime.session import Routed
from polystream.dialects.xai_realtime.binding import Session as Realtime
from polystream.dialects.xai_stt.binding import Session as STT
from polystream.events import BlockEnd, BlockStart, Metadata, TextDelta

from .test_properties import dump, interleave


def voice_response(rid: str, texts: list[str], args: list[str]) -> list[str]:
    """A response with an audio part whose transcript deltas name no content part, and
    a function call whose argument deltas name only its call id."""
    item, call, fc = f"item_{rid}", f"call_{rid}", f"fc_{rid}"
    out: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": rid, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "response_id": rid,
            "item": {"id": item, "type": "message", "content": []},
        },
        {
            "type": "response.content_part.added",
            "response_id": rid,
            "item_id": item,
            "content_index": 0,
            "part": {"type": "audio", "transcript": ""},
        },
        *(
            {"type": "response.output_audio_transcript.delta", "item_id": item, "delta": t}
            for t in texts
        ),
        {
            "type": "response.output_item.added",
            "response_id": rid,
            "item": {"id": fc, "type": "function_call", "call_id": call, "name": "f"},
        },
        *(
            {"type": "response.function_call_arguments.delta", "call_id": call, "delta": a}
            for a in args
        ),
        {
            "type": "response.function_call_arguments.done",
            "call_id": call,
            "arguments": "".join(args),
        },
        {"type": "response.done", "response": {"id": rid, "status": "completed"}},
    ]
    return [dump({**m, "event_id": f"ev_{rid}_{i}"}) for i, m in enumerate(out)]


def voice_news(texts: list[str]) -> list[str]:
    out: list[dict[str, Any]] = [{"type": "ping", "timestamp": 1}]
    so_far = ""
    for t in texts:
        so_far += t
        out.append(
            {
                "type": "conversation.item.input_audio_transcription.updated",
                "item_id": "u",
                "transcript": so_far,
            }
        )
    return [dump(m) for m in out]


SHORT = st.lists(st.text(max_size=3), max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    responses=st.lists(st.tuples(SHORT, SHORT), min_size=1, max_size=3),
    news=SHORT,
    data=st.data(),
)
def test_a_voice_response_gives_the_same_events_whatever_runs_beside_it(
    responses: list[tuple[list[str], list[str]]], news: list[str], data: st.DataObject
) -> None:
    scripts: dict[Any, list[str]] = {
        f"r{n}": voice_response(f"r{n}", texts, args) for n, (texts, args) in enumerate(responses)
    }
    scripts[None] = voice_news(news)
    together = Realtime(strict=True)
    mixed = [r for _, m in interleave(data, scripts) for r in together.feed(m)]

    def of(routed: list[Routed], key: Any) -> list[Any]:
        return [r.event for r in routed if r.response_id == key]

    for key, script in scripts.items():
        alone = Realtime(strict=True)
        assert of(mixed, key) == of([r for m in script for r in alone.feed(m)], key)


def channel_script(channel: int, utterances: list[list[str]]) -> list[str]:
    """Each utterance: its locked stretches (the last one ends it), an interim result
    before each."""
    out = []
    for chunks in utterances:
        for i, text in enumerate(chunks):
            common = {"text": text, "channel_index": channel, "start": float(i)}
            out.append({"type": "transcript.partial", **common, "is_final": False})
            last = i == len(chunks) - 1
            out.append(
                {"type": "transcript.partial", **common, "is_final": True, "speech_final": last}
            )
    return [dump(m) for m in out]


WORDS = st.text(alphabet="ab ", min_size=1, max_size=4)
CHANNEL = st.lists(st.lists(WORDS, min_size=1, max_size=3), max_size=3)


@settings(max_examples=80, deadline=None)
@given(channels=st.dictionaries(st.integers(0, 2), CHANNEL, min_size=1), data=st.data())
def test_a_channel_s_transcript_does_not_depend_on_the_others(
    channels: dict[int, list[list[str]]], data: st.DataObject
) -> None:
    scripts: dict[Any, list[str]] = {c: channel_script(c, u) for c, u in channels.items()}
    together = STT(strict=True)
    mixed = [r.event for _, m in interleave(data, scripts) for r in together.feed(m)]

    def own(events: list[Any], channel: int) -> list[Any]:
        """The channel's carrier events, without their block numbers."""
        return [
            (type(e).__name__, e.delta if isinstance(e, TextDelta) else e.value)
            for e in events
            if isinstance(e, TextDelta | Metadata) and e.extra["channel_index"] == channel
        ]

    for channel, script in scripts.items():
        alone = STT(strict=True)
        assert own(mixed, channel) == own([r.event for m in script for r in alone.feed(m)], channel)
    # One block per utterance, each ended by its speech_final.
    utterances = sum(len(u) for u in channels.values())
    assert sum(isinstance(e, BlockStart) for e in mixed) == utterances
    assert sum(isinstance(e, BlockEnd) for e in mixed) == utterances


@settings(max_examples=60, deadline=None)
@given(
    frames=st.integers(0, 2000),
    channels=st.integers(1, 2),
    chunk_ms=st.floats(0.5, 300.0),
    data=st.data(),
)
def test_audio_splits_into_whole_frames_that_join_back(
    frames: int, channels: int, chunk_ms: float, data: st.DataObject
) -> None:
    fmt = AudioFormat("pcm16", 16000, channels)
    session = STT(input=fmt)
    audio = data.draw(st.binary(min_size=frames * fmt.frame_size, max_size=frames * fmt.frame_size))
    chunks = session.send_audio(audio, chunk_ms=chunk_ms)
    assert b"".join(chunks) == audio
    assert all(len(c) % fmt.frame_size == 0 for c in chunks)
    assert len({len(c) for c in chunks[:-1]}) <= 1
    assert json.loads(session.commit_audio()[0]) == {"type": "audio.done"}
