"""polystream.Client and AsyncClient calling the media and agent-session endpoints of a
loopback upstream that replays fixture bytes: speech (SSE and raw audio), transcription
and image-edit uploads (multipart), image generation, the two agent sessions; typed
errors, retries, idle timeouts, no provider resume."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from polystream.client import AsyncClient, Client
from polystream.dialects import get_dialect
from polystream.errors import APIStatusError, RequestError, TransportError
from polystream.events import BlockStart, DataDelta, Event, Finish, StreamStart, Warning
from polystream.retry import RetryPolicy
from polystream.wire.multipart import decode_form
from tests.gateway.replay import Replay, Reply, replaying

FIXTURES = Path(__file__).parent.parent / "fixtures"
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
WAV = b"RIFF\x24\x20\x00\x00WAVEfmt " + bytes(range(256)) * 30  # 7,692 bytes
AUDIO = b"RIFF\x10\x00\x00\x00WAVEdata-of-a-short-clip"


def fixture(dialect: str, name: str) -> bytes:
    return (FIXTURES / dialect / name).read_bytes()


def decoded(dialect: str, data: bytes, **options: Any) -> list[Event]:
    """The events of ``data`` as the dialect's decoder reads them whole."""
    decoder = get_dialect(dialect).decoder(**options)
    return decoder.feed(data) + decoder.close()


def client(base: str, **options: Any) -> Client:
    return Client(api_key="test-key", base_url=base, retry=FAST, **options)


@contextmanager
def calling(*replies: Reply, **options: Any) -> Iterator[tuple[Replay, Client]]:
    """A replaying upstream and a client of its OpenAI base URL."""
    with replaying(*replies) as (upstream, server), client(server.base_url + "/v1", **options) as c:
        yield upstream, c


def audio_of(events: list[Event]) -> bytes:
    return b"".join(base64.b64decode(e.delta) for e in events if isinstance(e, DataDelta))


# -- speech ------------------------------------------------------------------------------


def test_speech_streams_its_sse_events() -> None:
    data = fixture("openai_speech", "audio.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        stream = c.stream(
            "openai_speech", model="gpt-4o-mini-tts", prompt="Hi.", extra={"voice": "alloy"}
        )
        events = list(stream)
    assert events == decoded("openai_speech", data)
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", "/v1/audio/speech")
    assert seen.headers["accept"] == "text/event-stream"
    assert seen.headers["authorization"] == "Bearer test-key"
    assert seen.headers["content-type"] == "application/json"
    assert msgspec.json.decode(seen.body) == {
        "input": "Hi.",
        "model": "gpt-4o-mini-tts",
        "voice": "alloy",
        "stream_format": "sse",
    }


def test_raw_speech_is_the_audio_in_the_requested_format() -> None:
    reply = Reply([WAV[:5000], WAV[5000:]], content_type="audio/wav", length=True)
    with replaying(reply) as (upstream, server), client(server.base_url + "/v1") as c:
        stream = c.stream(
            "openai_speech",
            model="gpt-4o-mini-tts",
            prompt="Hi.",
            extra={"voice": "alloy", "response_format": "wav"},
            framing="raw",
        )
        events = list(stream)
    expected = decoded(
        "openai_speech",
        WAV,
        framing="raw",
        audio_format="wav",
        content_type="audio/wav",
        expected_length=len(WAV),
    )
    assert events == expected
    assert audio_of(events) == WAV
    start = next(e for e in events if isinstance(e, BlockStart))
    assert start.media is not None and (start.media.format, start.media.mime_type) == (
        "wav",
        "audio/wav",
    )
    assert isinstance(events[-1], Finish) and events[-1].status == "completed"
    [seen] = upstream.seen
    assert seen.headers["accept"] == "*/*"
    # No stream_format: the audio itself is asked for.
    assert msgspec.json.decode(seen.body) == {
        "input": "Hi.",
        "model": "gpt-4o-mini-tts",
        "voice": "alloy",
        "response_format": "wav",
    }


def test_raw_speech_format_from_the_content_type() -> None:
    mp3 = b"ID3\x04" + bytes(100)
    with calling(Reply(mp3, content_type="audio/mpeg")) as (_, c):
        events = list(c.stream("openai_speech", model="tts-1", prompt="Hi.", framing="raw"))
    start = next(e for e in events if isinstance(e, BlockStart))
    assert start.media is not None and start.media.format == "mp3"
    assert audio_of(events) == mp3


def test_raw_speech_cut_short_ends_truncated_without_resume() -> None:
    reply = Reply(WAV[:4000], content_type="audio/wav", length=True, declared=len(WAV), cut=True)
    with replaying(reply) as (upstream, server), client(server.base_url + "/v1") as c:
        stream = c.stream("openai_speech", model="tts-1", prompt="Hi.", framing="raw")
        events = list(stream)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.error is not None and finish.error.message.endswith(
        "(openai_speech has no resume)"
    )
    assert audio_of(events) == WAV[:4000]  # (all that came)
    # Output was delivered: no retry, no resume request.
    assert len(upstream.seen) == 1


# -- uploads -----------------------------------------------------------------------------


def test_transcription_uploads_the_audio_as_a_form() -> None:
    data = fixture("openai_transcription", "normal.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        stream = c.stream(
            "openai_transcription",
            model="gpt-4o-transcribe",
            files={"file": ("clip.wav", AUDIO, "audio/wav")},
            extra={"language": "en"},
        )
        events = list(stream)
    assert events == decoded("openai_transcription", data)
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", "/v1/audio/transcriptions")
    form = decode_form(seen.headers["content-type"], seen.body)
    assert form.fields == {
        "language": "en",
        "file": {"filename": "clip.wav", "content_type": "audio/wav", "size": len(AUDIO)},
        "model": "gpt-4o-transcribe",
        "stream": "true",
    }
    assert form.files == {"file": AUDIO}


def test_an_upload_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "take 1.wav"
    path.write_bytes(AUDIO)
    with calling(Reply(fixture("openai_transcription", "normal.sse"))) as (upstream, c):
        list(c.stream("openai_transcription", model="whisper-1", files={"file": path}))
    form = decode_form(upstream.seen[0].headers["content-type"], upstream.seen[0].body)
    assert form.fields["file"] == {
        "filename": "take 1.wav",
        "content_type": "audio/x-wav",
        "size": len(AUDIO),
    }
    assert form.files == {"file": AUDIO}


def test_a_retry_sends_the_same_form_again() -> None:
    busy = Reply(
        b'{"error":{"message":"busy","type":"server_error","param":null,"code":null}}',
        status=503,
        content_type="application/json",
    )
    data = fixture("openai_transcription", "normal.sse")
    with calling(busy, Reply(data)) as (upstream, c):
        events = list(c.stream("openai_transcription", model="whisper-1", files={"file": AUDIO}))
    assert isinstance(events[0], Warning) and events[0].code == "retry"
    assert events[1:] == decoded("openai_transcription", data)
    first, second = upstream.seen
    assert first.body == second.body
    assert first.headers["content-type"] == second.headers["content-type"]


def test_image_generation_sends_json() -> None:
    data = fixture("openai_images", "generation.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        events = list(
            c.stream(
                "openai_images",
                model="gpt-image-1",
                prompt="A blue square.",
                extra={"partial_images": 2, "size": "1024x1024"},
            )
        )
    assert events == decoded("openai_images", data)
    [seen] = upstream.seen
    assert seen.path == "/v1/images/generations"
    assert msgspec.json.decode(seen.body) == {
        "partial_images": 2,
        "size": "1024x1024",
        "prompt": "A blue square.",
        "model": "gpt-image-1",
        "stream": True,
    }


def test_an_image_edit_uploads_the_image() -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAADklEQVR4nGM4AQYMEAoAQa4JYQOnncMAAAAASUVORK5CYII="
    )
    data = fixture("openai_images", "edit.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        events = list(
            c.stream(
                "openai_images",
                model="gpt-image-1",
                prompt="Make it blue.",
                files={"image": ("in.png", png)},
                extra={"partial_images": 1},
            )
        )
    assert events == decoded("openai_images", data)
    [seen] = upstream.seen
    assert seen.path == "/v1/images/edits"
    form = decode_form(seen.headers["content-type"], seen.body)
    assert form.fields == {
        "partial_images": "1",
        "image": {"filename": "in.png", "content_type": "image/png", "size": len(png)},
        "prompt": "Make it blue.",
        "model": "gpt-image-1",
        "stream": "true",
    }
    assert form.files == {"image": png}


# -- agent sessions ----------------------------------------------------------------------


def test_openai_agent_session_is_created_streaming() -> None:
    data = fixture("openai_agent_session", "session.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        events = list(
            c.stream("openai_agent_session", model="gpt-5.4-mini", prompt="Tidy the repo.")
        )
    assert events == decoded("openai_agent_session", data)
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", "/v1/agents/sessions")
    assert seen.headers["openai-beta"] == "agents=v1"
    assert msgspec.json.decode(seen.body) == {
        "environment": {"type": "none"},
        "agent": {"model": "gpt-5.4-mini"},
        "input": [
            {
                "content": [{"type": "input_text", "text": "Tidy the repo."}],
                "role": "user",
                "type": "message",
            }
        ],
        "stream": True,
    }


def test_openai_agent_session_subscribes_to_a_session() -> None:
    data = fixture("openai_agent_session", "session.sse")
    with replaying(Reply(data)) as (upstream, server), client(server.base_url + "/v1") as c:
        events = list(c.stream("openai_agent_session", model="", session="sess_9"))
    assert events == decoded("openai_agent_session", data)
    [seen] = upstream.seen
    assert (seen.method, seen.path, seen.body) == ("GET", "/v1/agents/sessions/sess_9/events", b"")
    assert seen.headers["accept"] == "text/event-stream"


def test_openai_agent_session_input_goes_with_a_new_session_only() -> None:
    with (
        Client(api_key="k", base_url="http://127.0.0.1:9/v1") as c,
        pytest.raises(RequestError) as caught,
    ):
        c.stream("openai_agent_session", model="m", prompt="Hi.", session="sess_9")
    assert caught.value.param == "messages"


def test_anthropic_session_is_subscribed_before_its_input_is_sent() -> None:
    data = fixture("anthropic_agent_session", "session.sse")

    def plan(method: str, path: str) -> Reply:
        if method == "GET":
            return Reply(data)
        return Reply(b'{"data":[]}', content_type="application/json")

    with replaying(plan=plan) as (upstream, server), client(server.base_url) as c:
        stream = c.stream(
            "anthropic_agent_session", model="", prompt="List the files.", session="sesn_1"
        )
        events = list(stream)
    assert events == decoded("anthropic_agent_session", data)
    subscribe, sent = upstream.seen
    assert (subscribe.method, subscribe.path) == ("GET", "/v1/sessions/sesn_1/events/stream")
    assert subscribe.headers["anthropic-beta"] == "managed-agents-2026-04-01"
    assert subscribe.headers["x-api-key"] == "test-key"
    assert (sent.method, sent.path) == ("POST", "/v1/sessions/sesn_1/events")
    assert msgspec.json.decode(sent.body) == {
        "events": [
            {"type": "user.message", "content": [{"type": "text", "text": "List the files."}]}
        ]
    }


def test_anthropic_session_needs_its_id() -> None:
    with (
        Client(api_key="k", base_url="http://127.0.0.1:9") as c,
        pytest.raises(RequestError) as caught,
    ):
        c.stream("anthropic_agent_session", model="", prompt="Hi.")
    assert caught.value.param == "session"


def test_refused_session_input_is_a_typed_error() -> None:
    refusal = b'{"type":"error","error":{"type":"not_found_error","message":"no session sesn_x"}}'

    def plan(method: str, path: str) -> Reply:
        if method == "GET":
            return Reply(fixture("anthropic_agent_session", "session.sse"))
        return Reply(refusal, status=404, content_type="application/json")

    with replaying(plan=plan) as (_, server), client(server.base_url) as c:
        stream = c.stream("anthropic_agent_session", model="", prompt="Hi.", session="sesn_x")
        with pytest.raises(APIStatusError) as caught:
            list(stream)
    assert caught.value.status_code == 404
    assert caught.value.kind == "not_found"
    assert str(caught.value) == (
        "HTTP 404 not_found: sending the input to session sesn_x: no session sesn_x"
    )


def test_session_input_that_cannot_be_sent_is_a_transport_error() -> None:
    def plan(method: str, path: str) -> Reply:
        if method == "GET":
            return Reply(fixture("anthropic_agent_session", "session.sse"))
        return Reply(b'{"da', content_type="application/json", length=True, declared=99, cut=True)

    with (
        replaying(plan=plan) as (_, server),
        client(server.base_url) as c,
        pytest.raises(TransportError) as caught,
    ):
        list(c.stream("anthropic_agent_session", model="", prompt="Hi.", session="s1"))
    assert str(caught.value).startswith("sending the input to session s1: ")


# -- errors and timeouts -----------------------------------------------------------------


def test_an_error_body_is_a_typed_exception() -> None:
    body = (
        b'{"error":{"message":"voice is required","type":"invalid_request_error",'
        b'"param":"voice","code":null}}'
    )
    reply = Reply(body, status=400, content_type="application/json")
    with calling(reply) as (up, c), pytest.raises(APIStatusError) as caught:
        list(c.stream("openai_speech", model="tts-1", prompt="Hi."))
    assert caught.value.status_code == 400
    assert caught.value.kind == "invalid_request"
    assert str(caught.value) == "HTTP 400 invalid_request: voice is required"
    assert len(up.seen) == 1  # (a 400 is not retried)


def test_a_stalled_stream_ends_truncated() -> None:
    data = fixture("openai_transcription", "normal.sse")
    head, tail = data[:200], data[200:]
    with calling(Reply([head, tail], pause=2.0), idle_timeout=0.3) as (_, c):
        events = list(c.stream("openai_transcription", model="whisper-1", files={"file": AUDIO}))
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"
    assert finish.error is not None
    assert finish.error.message == "no data for 0.3 s (openai_transcription has no resume)"


# -- async -------------------------------------------------------------------------------


def test_async_client_uploads_and_sends_session_input() -> None:
    transcript = fixture("openai_transcription", "normal.sse")
    session = fixture("anthropic_agent_session", "session.sse")

    def plan(method: str, path: str) -> Reply:
        if path == "/v1/audio/transcriptions":
            return Reply(transcript)
        if method == "GET":
            return Reply(session)
        return Reply(b"{}", content_type="application/json")

    async def run(base: str) -> tuple[list[Event], list[Event]]:
        async with AsyncClient(
            api_key="k", base_url={"openai": base + "/v1", "anthropic": base}
        ) as c:
            first = c.stream("openai_transcription", model="whisper-1", files={"file": AUDIO})
            second = c.stream("anthropic_agent_session", model="", prompt="Go.", session="s1")
            return [e async for e in first], [e async for e in second]

    with replaying(plan=plan) as (upstream, server):
        heard, ran = asyncio.run(run(server.base_url))
    assert heard == decoded("openai_transcription", transcript)
    assert ran == decoded("anthropic_agent_session", session)
    assert [(s.method, s.path) for s in upstream.seen] == [
        ("POST", "/v1/audio/transcriptions"),
        ("GET", "/v1/sessions/s1/events/stream"),
        ("POST", "/v1/sessions/s1/events"),
    ]
    assert isinstance(heard[0], StreamStart)
