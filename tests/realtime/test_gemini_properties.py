"""Gemini Live sessions, for any sequence of the family's messages (hypothesis): reading
never raises in tolerant mode, every stream has exactly one ``StreamStart`` first and,
after the close, exactly one ``Finish`` last, and the text of each turn is the text its
parts carried."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.events import Finish, StreamStart, TextDelta
from polystream.realtime import open_session

_TEXT = st.text(min_size=1, max_size=5)

MESSAGES = st.one_of(
    st.builds(lambda t: {"serverContent": {"modelTurn": {"parts": [{"text": t}]}}}, _TEXT),
    st.builds(
        lambda t: {"serverContent": {"modelTurn": {"parts": [{"text": t, "thought": True}]}}},
        _TEXT,
    ),
    st.builds(
        lambda d: {
            "serverContent": {
                "modelTurn": {
                    "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": d}}]
                }
            }
        },
        st.sampled_from(["AAA=", "AQI="]),
    ),
    st.builds(lambda t: {"serverContent": {"outputTranscription": {"text": t}}}, _TEXT),
    st.builds(lambda t: {"serverContent": {"inputTranscription": {"text": t}}}, _TEXT),
    st.just({"serverContent": {"inputTranscription": {"finished": True}}}),
    st.just({"serverContent": {"generationComplete": True}}),
    st.just({"serverContent": {"interrupted": True}}),
    st.just({"serverContent": {"turnComplete": True}}),
    st.just({"toolCall": {"functionCalls": [{"id": "c", "name": "f", "args": {}}]}}),
    st.just({"toolCallCancellation": {"ids": ["c"]}}),
    st.just({"usageMetadata": {"totalTokenCount": 1}}),
    st.just({"goAway": {"timeLeft": "1s"}}),
    st.just({"sessionResumptionUpdate": {"newHandle": "h", "resumable": True}}),
    st.just({"setupComplete": {}}),
    st.just({"unknownKey": 1}),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(MESSAGES, max_size=25), st.booleans())
def test_any_sequence_reads_into_well_formed_streams(
    messages: list[dict[str, Any]], binary: bool
) -> None:
    session = open_session("gemini_live", model="m")
    routed = []
    for message in messages:
        text = json.dumps(message)
        routed += session.feed(text.encode() if binary else text)
    routed += session.close()
    streams: dict[int, list[Any]] = {}
    for r in routed:
        if r.stream:
            streams.setdefault(r.stream, []).append(r.event)
    assert list(streams) == list(range(1, len(streams) + 1))
    for events in streams.values():
        assert type(events[0]) is StreamStart
        assert [type(e) for e in events].count(StreamStart) == 1
        assert type(events[-1]) is Finish
        assert [type(e) for e in events].count(Finish) == 1
    texts = "".join(r.event.delta for r in routed if r.stream and type(r.event) is TextDelta)
    said = "".join(
        p["text"]
        for m in messages
        for p in m.get("serverContent", {}).get("modelTurn", {}).get("parts", [])
        if "text" in p and not p.get("thought")
    ) + "".join(
        m["serverContent"]["outputTranscription"]["text"]
        for m in messages
        if "outputTranscription" in m.get("serverContent", {})
    )
    assert sorted(texts) == sorted(said)  # (transcript and text deltas interleave)
