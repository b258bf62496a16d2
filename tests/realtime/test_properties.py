"""Interleavings: what one lane (Responses WebSocket) or one response (Realtime) gives
does not depend on what runs beside it."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from polystream.dialects._realtime.session import Routed
from polystream.dialects.openai_realtime.binding import Session as Realtime
from polystream.dialects.openai_responses_ws.binding import Session as Responses


def dump(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"))


def responses_reply(lane: str, n: int, texts: list[str], error: bool) -> list[str]:
    """One reply of ``lane``: a text message streamed in ``texts``; or, with ``error``, a
    request that fails before its response begins."""
    if error:
        return [
            dump(
                {
                    "type": "error",
                    "status": 400,
                    "error": {
                        "type": "invalid_request_error",
                        "code": "previous_response_not_found",
                        "message": "gone",
                    },
                    "stream_id": lane,
                }
            )
        ]
    rid, item = f"resp_{lane}{n}", f"msg_{lane}{n}"
    part = {"type": "output_text", "text": "", "annotations": []}
    out = [
        {
            "type": "response.created",
            "response": {"id": rid, "status": "in_progress", "output": []},
        },
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": item, "type": "message", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": item,
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
        *(
            {
                "type": "response.output_text.delta",
                "item_id": item,
                "output_index": 0,
                "content_index": 0,
                "delta": t,
            }
            for t in texts
        ),
        {
            "type": "response.content_part.done",
            "item_id": item,
            "output_index": 0,
            "content_index": 0,
            "part": {**part, "text": "".join(texts)},
        },
        {
            "type": "response.completed",
            "response": {"id": rid, "status": "completed", "output": []},
        },
    ]
    return [dump({**m, "sequence_number": seq, "stream_id": lane}) for seq, m in enumerate(out)]


LANE = st.lists(
    st.tuples(st.lists(st.text(max_size=4), max_size=3), st.booleans()), min_size=1, max_size=3
)


def interleave(data: st.DataObject, queues: dict[Any, list[str]]) -> list[tuple[Any, str]]:
    """The messages of every queue, merged in an order hypothesis draws (each queue's own
    order kept)."""
    queues = {key: list(q) for key, q in queues.items() if q}
    merged: list[tuple[Any, str]] = []
    while queues:
        key = data.draw(st.sampled_from(sorted(queues, key=str)))
        merged.append((key, queues[key].pop(0)))
        if not queues[key]:
            del queues[key]
    return merged


def by_lane(routed: list[Routed]) -> dict[str | None, list[Any]]:
    out: dict[str | None, list[Any]] = {}
    for r in routed:
        out.setdefault(r.lane, []).append((r.response_id, r.event))
    return out


@settings(max_examples=60, deadline=None)
@given(lanes=st.dictionaries(st.sampled_from(["a", "b", "c"]), LANE, min_size=1), data=st.data())
def test_a_lane_gives_the_same_events_whatever_runs_beside_it(
    lanes: dict[str, list[tuple[list[str], bool]]], data: st.DataObject
) -> None:
    scripts = {
        lane: [
            m
            for n, (texts, error) in enumerate(replies)
            for m in responses_reply(lane, n, texts, error)
        ]
        for lane, replies in lanes.items()
    }

    def session() -> Responses:
        s = Responses()
        for lane, replies in lanes.items():
            for _ in replies:
                s.create_response(input="x", lane=lane)
        return s

    together = session()
    mixed = [r for _, message in interleave(data, scripts) for r in together.feed(message)]
    mixed += together.close()
    for lane, script in scripts.items():
        alone = session()
        own = [r for message in script for r in alone.feed(message)] + alone.close()
        assert by_lane(mixed)[lane] == by_lane(own)[lane]
        # Each request was answered by its own reply, in order: one finish each.
        finishes = [e for _, e in by_lane(mixed)[lane] if type(e).__name__ == "Finish"]
        assert len(finishes) == len(lanes[lane])


def realtime_response(rid: str, chunks: list[bytes], texts: list[str]) -> list[str]:
    item = f"item_{rid}"
    common = {"response_id": rid, "item_id": item, "output_index": 0, "content_index": 0}
    out = [
        {
            "type": "response.created",
            "response": {"id": rid, "status": "in_progress", "output": []},
        },
        {
            "type": "response.output_item.added",
            "response_id": rid,
            "output_index": 0,
            "item": {"id": item, "type": "message", "content": []},
        },
        {
            "type": "response.content_part.added",
            **common,
            "part": {"type": "audio", "transcript": ""},
        },
    ]
    for chunk, text in zip(chunks, texts, strict=False):
        out.append(
            {
                "type": "response.output_audio.delta",
                **common,
                "delta": base64.b64encode(chunk).decode(),
            }
        )
        out.append({"type": "response.output_audio_transcript.delta", **common, "delta": text})
    out += [
        {
            "type": "response.content_part.done",
            **common,
            "part": {"type": "audio", "transcript": "".join(texts)},
        },
        {"type": "response.done", "response": {"id": rid, "status": "completed", "output": []}},
    ]
    return [dump({**m, "event_id": f"ev_{rid}_{i}"}) for i, m in enumerate(out)]


def realtime_session_news(texts: list[str]) -> list[str]:
    out: list[dict[str, Any]] = [
        {"type": "input_audio_buffer.speech_started", "audio_start_ms": 5, "item_id": "u"}
    ]
    out += [
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "item_id": "u",
            "content_index": 0,
            "delta": t,
        }
        for t in texts
    ]
    out.append({"type": "rate_limits.updated", "rate_limits": []})
    return [dump({**m, "event_id": f"ev_s{i}"}) for i, m in enumerate(out)]


RESPONSE = st.tuples(
    st.lists(st.binary(min_size=2, max_size=8).filter(lambda b: len(b) % 2 == 0), max_size=3),
    st.lists(st.text(max_size=3), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    responses=st.lists(RESPONSE, min_size=1, max_size=3),
    news=st.lists(st.text(max_size=3), max_size=3),
    data=st.data(),
)
def test_a_realtime_response_gives_the_same_events_whatever_runs_beside_it(
    responses: list[tuple[list[bytes], list[str]]], news: list[str], data: st.DataObject
) -> None:
    scripts: dict[Any, list[str]] = {
        f"resp_{n}": realtime_response(f"resp_{n}", chunks, texts)
        for n, (chunks, texts) in enumerate(responses)
    }
    scripts[None] = realtime_session_news(news)
    together = Realtime()
    mixed = [r for _, message in interleave(data, scripts) for r in together.feed(message)]

    def of(routed: list[Routed], key: Any) -> list[Any]:
        return [r.event for r in routed if r.response_id == key]

    for key, script in scripts.items():
        alone = Realtime()
        assert of(mixed, key) == of([r for m in script for r in alone.feed(m)], key)
    # And the audio counted for barge-in is each item's own.
    for n, (chunks, texts) in enumerate(responses):
        received = sum(len(c) for c in chunks[: len(texts)]) / 48
        assert together.received_ms(f"item_resp_{n}") == received
