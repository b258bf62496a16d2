"""The gateway in front of the media and agent-session endpoints, with the official
SDKs as its clients and a loopback upstream replaying fixture bytes: same-dialect
pass-through (the client gets the upstream's bytes, the ``id:`` lines of the gateway's
resume cursors aside), multipart uploads forwarded byte for byte, raw speech audio
streamed as it comes, requests that ask for no stream relayed, the 400 of a pair of
families the gateway cannot join, and resume from the journal."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import msgspec
import openai
import pytest

from polystream.gateway_core import GatewayConfig, Route, Upstream
from polystream.retry import RetryPolicy
from polystream.server.gateway import create_gateway
from polystream.wire.multipart import decode_form
from tests.gateway.conftest import CANARY, GATEWAY_KEY, AppThread
from tests.gateway.replay import Replay, Reply, replaying

FIXTURES = Path(__file__).parent.parent / "fixtures"
ID_LINE = re.compile(rb"(?m)^id: ([0-9a-f]{32})\.(\d+)\n")
WAV = b"RIFF\x24\x20\x00\x00WAVEfmt " + bytes(range(256)) * 30
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000002000000020802000000fdd49a73"
    "0000000e4944415478da63f8010604100a00412e0961037a9dc30000000049454e44ae426082"
)


def fixture(dialect: str, name: str) -> bytes:
    return (FIXTURES / dialect / name).read_bytes()


def without_ids(data: bytes) -> bytes:
    """A stream without the ``id:`` lines the gateway writes (its resume cursors)."""
    return ID_LINE.sub(b"", data)


class Sent:
    """The requests an SDK sent (an httpx2 event hook)."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> None:
        request.read()
        self.requests.append(request)

    def client(self) -> httpx2.Client:
        return httpx2.Client(event_hooks={"request": [self]})


@contextmanager
def gateway(
    dialect: str,
    *replies: Reply,
    plan: Any = None,
    routes: list[Route] | None = None,
    server: str = "polystream",
) -> Iterator[tuple[Replay, AppThread]]:
    """A replaying upstream of ``dialect`` and a gateway in front of it."""
    with replaying(*replies, plan=plan) as (upstream, app):
        provider = dialect.split("_", 1)[0]
        base = app.base_url + ("/v1" if provider == "openai" else "")
        up = Upstream(name=provider, dialect=dialect, base_url=base, api_key=CANARY)
        config = GatewayConfig(upstreams={provider: up}, routes=routes or [], api_key=GATEWAY_KEY)
        retry = RetryPolicy(max_retries=1, initial_delay=0.01, max_delay=0.02)
        front = AppThread(create_gateway(config, retry=retry), server=server).start()
        try:
            yield upstream, front
        finally:
            front.stop()


def sdk(front: AppThread, sent: Sent | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=front.base_url + "/openai/v1",
        api_key=GATEWAY_KEY,
        max_retries=0,
        http_client=(sent or Sent()).client(),
    )


def speak(client: openai.OpenAI, **options: Any) -> tuple[bytes, Any]:
    """The body and headers of a speech request made with the SDK's streaming response."""
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input="Hello.", **options
    ) as response:
        return response.read(), response.headers


def post(front: AppThread, path: str, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {GATEWAY_KEY}", **kw.pop("headers", {})}
    return httpx.post(front.base_url + path, headers=headers, timeout=10, **kw)


# -- speech --------------------------------------------------------------------------------


def test_speech_sse_passes_through() -> None:
    data = fixture("openai_speech", "audio.sse")
    sent = Sent()
    with gateway("openai_speech", Reply(data)) as (upstream, front):
        body, headers = speak(sdk(front, sent), stream_format="sse")
    assert without_ids(body) == data
    stream_id = headers["x-polystream-stream-id"]
    assert [(m[1], m[2]) for m in ID_LINE.finditer(body)] == [
        (stream_id.encode(), str(n).encode()) for n in range(1, 6)
    ]
    assert headers["content-type"] == "text/event-stream"
    [seen] = upstream.seen
    assert (seen.method, seen.path) == ("POST", "/v1/audio/speech")
    assert seen.headers["authorization"] == f"Bearer {CANARY}"
    assert msgspec.json.decode(seen.body) == msgspec.json.decode(sent.requests[0].content)


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_raw_speech_streams_the_audio_unchanged(server: str) -> None:
    reply = Reply([WAV[:5000], WAV[5000:]], content_type="audio/wav", length=True)
    with gateway("openai_speech", reply, server=server) as (upstream, front):
        body, headers = speak(sdk(front), response_format="wav")
    assert body == WAV
    assert headers["content-type"] == "audio/wav"
    assert "x-polystream-stream-id" not in headers  # (no journal: raw audio has no cursors)
    assert msgspec.json.decode(upstream.seen[0].body) == {
        "model": "gpt-4o-mini-tts",
        "input": "Hello.",
        "voice": "alloy",
        "response_format": "wav",
    }


def test_raw_speech_cut_short_is_a_broken_transfer() -> None:
    reply = Reply(WAV[:4000], content_type="audio/wav", length=True, declared=len(WAV), cut=True)
    with gateway("openai_speech", reply) as (_, front):
        received = b""
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream(
                "POST",
                front.base_url + "/openai/v1/audio/speech",
                headers={"authorization": f"Bearer {GATEWAY_KEY}"},
                json={"model": "tts-1", "input": "Hello.", "voice": "alloy"},
            ) as response,
        ):
            assert response.headers["content-type"] == "audio/wav"
            for chunk in response.iter_raw():
                received += chunk
    assert received == WAV[:4000]


# -- uploads -------------------------------------------------------------------------------


def test_transcription_upload_is_forwarded_byte_for_byte() -> None:
    data = fixture("openai_transcription", "normal.sse")
    sent = Sent()
    with gateway("openai_transcription", Reply(data)) as (upstream, front):
        events = list(
            sdk(front, sent).audio.transcriptions.create(
                model="gpt-4o-transcribe",
                file=("clip.wav", WAV, "audio/wav"),
                stream=True,
                language="en",
            )
        )
        [request] = sent.requests
        # The same form, sent again without the SDK, for the gateway's exact answer.
        raw = post(
            front,
            "/openai/v1/audio/transcriptions",
            content=request.content,
            headers={"content-type": request.headers["content-type"]},
        )
    assert [e.type for e in events] == ["transcript.text.delta"] * 6 + ["transcript.text.done"]
    assert events[-1].text == "The quick brown fox jumps."  # type: ignore[union-attr]
    assert raw.status_code == 200 and without_ids(raw.content) == data
    first, again = upstream.seen
    assert first.path == "/v1/audio/transcriptions"
    assert first.body == request.content == again.body
    assert first.headers["content-type"] == request.headers["content-type"]


def test_a_rewritten_model_writes_the_form_again() -> None:
    data = fixture("openai_transcription", "normal.sse")
    route = Route(model="*", upstream="openai", rewrite="gpt-4o-mini-transcribe")
    with gateway("openai_transcription", Reply(data), routes=[route]) as (upstream, front):
        list(
            sdk(front).audio.transcriptions.create(
                model="whisper-1", file=("clip.wav", WAV, "audio/wav"), stream=True
            )
        )
    [seen] = upstream.seen
    form = decode_form(seen.headers["content-type"], seen.body)
    assert form.fields == {
        "model": "gpt-4o-mini-transcribe",
        "stream": "true",
        "file": {"filename": "clip.wav", "content_type": "audio/wav", "size": len(WAV)},
    }
    assert form.files == {"file": WAV}


def test_a_transcription_without_stream_is_relayed() -> None:
    reply = Reply(b"The quick brown fox jumps.\n", content_type="text/plain; charset=utf-8")
    sent = Sent()
    with gateway("openai_transcription", reply) as (upstream, front):
        text = sdk(front, sent).audio.transcriptions.create(
            model="whisper-1", file=("clip.wav", WAV, "audio/wav"), response_format="text"
        )
    assert text == "The quick brown fox jumps.\n"
    [seen] = upstream.seen
    assert seen.body == sent.requests[0].content
    assert seen.headers["authorization"] == f"Bearer {CANARY}"


def test_image_generation_streams_through_the_sdk() -> None:
    data = fixture("openai_images", "generation.sse")
    sent = Sent()
    with gateway("openai_images", Reply(data)) as (upstream, front):
        events = list(
            sdk(front, sent).images.generate(
                model="gpt-image-1", prompt="A blue square.", stream=True, partial_images=2
            )
        )
        raw = post(front, "/openai/v1/images/generations", content=sent.requests[0].content)
    assert [e.type for e in events] == [
        "image_generation.partial_image",
        "image_generation.partial_image",
        "image_generation.completed",
    ]
    natives = [msgspec.json.decode(line[6:]) for line in data.split(b"\n") if line[:6] == b"data: "]
    assert [e.b64_json for e in events] == [n["b64_json"] for n in natives]
    assert without_ids(raw.content) == data
    assert msgspec.json.decode(upstream.seen[0].body) == {
        "model": "gpt-image-1",
        "prompt": "A blue square.",
        "partial_images": 2,
        "stream": True,
    }


def test_an_image_edit_is_forwarded_byte_for_byte() -> None:
    data = fixture("openai_images", "edit.sse")
    sent = Sent()
    with gateway("openai_images", Reply(data)) as (upstream, front):
        events = list(
            sdk(front, sent).images.edit(
                model="gpt-image-1",
                image=("in.png", PNG, "image/png"),
                prompt="Make it blue.",
                stream=True,
                partial_images=1,
            )
        )
    assert [e.type for e in events] == ["image_edit.partial_image", "image_edit.completed"]
    [seen] = upstream.seen
    assert seen.path == "/v1/images/edits"
    assert seen.body == sent.requests[0].content
    assert seen.headers["content-type"] == sent.requests[0].headers["content-type"]


# -- agent sessions ------------------------------------------------------------------------


def test_openai_agent_session_is_created_and_subscribed() -> None:
    data = fixture("openai_agent_session", "session.sse")
    sent = Sent()
    with gateway("openai_agent_session", Reply(data)) as (upstream, front):
        client = sdk(front, sent)
        created = list(
            client.beta.agents.sessions.create(
                environment={"type": "none"},
                agent={"model": "gpt-5.4-mini"},
                input="Tidy the repo.",
                stream=True,
            )
        )
        followed = list(client.beta.agents.sessions.events.stream("sess_9"))
        raw = post(front, "/openai/v1/agents/sessions", content=sent.requests[0].content)
    assert [e.type for e in created] == [e.type for e in followed]
    assert created[0].type == "agent.session.created"
    # The upstream's opening comment is not relayed (the gateway keeps its clients alive
    # with its own); every event is, byte for byte.
    assert data.startswith(b": connected\n\n")
    assert without_ids(raw.content) == data[len(b": connected\n\n") :]
    create, subscribe, _ = upstream.seen
    assert (create.method, create.path) == ("POST", "/v1/agents/sessions")
    assert msgspec.json.decode(create.body) == msgspec.json.decode(sent.requests[0].content)
    assert (subscribe.method, subscribe.path) == ("GET", "/v1/agents/sessions/sess_9/events")
    assert subscribe.headers["openai-beta"] == "agents=v1"


def test_anthropic_session_is_streamed_and_sent_to() -> None:
    data = fixture("anthropic_agent_session", "session.sse")

    def plan(method: str, path: str) -> Reply:
        if method == "GET":
            return Reply(data)
        return Reply(
            b'{"data":[{"type":"user.message","id":"sevt_1"}]}', content_type="application/json"
        )

    with gateway("anthropic_agent_session", plan=plan) as (upstream, front):
        client = anthropic.Anthropic(
            base_url=front.base_url + "/anthropic", api_key=GATEWAY_KEY, max_retries=0
        )
        with client.beta.sessions.events.stream("sesn_1") as stream:
            events = list(stream)
        answer = client.beta.sessions.events.with_raw_response.send(
            "sesn_1",
            events=[{"type": "user.message", "content": [{"type": "text", "text": "Go on."}]}],
        )
    assert events[0].type == "user.message" and events[-1].type == "session.status_idle"
    assert answer.http_response.content == b'{"data":[{"type":"user.message","id":"sevt_1"}]}'
    subscribe, send = upstream.seen
    assert (subscribe.method, subscribe.path) == ("GET", "/v1/sessions/sesn_1/events/stream")
    assert subscribe.headers["x-api-key"] == CANARY
    assert (send.method, send.path) == ("POST", "/v1/sessions/sesn_1/events")
    assert msgspec.json.decode(send.body) == {
        "events": [{"type": "user.message", "content": [{"type": "text", "text": "Go on."}]}]
    }


# -- refusals, errors, resume --------------------------------------------------------------


def test_a_chat_client_is_not_served_by_a_speech_upstream() -> None:
    with (
        gateway("openai_speech", Reply(b"")) as (upstream, front),
        pytest.raises(openai.BadRequestError) as caught,
    ):
        sdk(front).chat.completions.create(
            model="gpt-4o-mini-tts", messages=[{"role": "user", "content": "Hi."}]
        )
    assert caught.value.body == {
        "message": "the model is served by the openai_speech upstream, whose stream is speech: "
        "a speech stream cannot be turned into a chat dialect (openai_chat)",
        "type": "invalid_request_error",
        "param": "model",
        "code": None,
    }
    assert upstream.seen == []


def test_a_speech_client_is_not_served_by_a_chat_upstream() -> None:
    with gateway("openai_chat", Reply(b"")) as (upstream, front):
        response = post(
            front,
            "/openai/v1/audio/speech",
            json={"model": "gpt-5.4-nano", "input": "Hi.", "voice": "alloy"},
        )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "the model is served by the openai_chat upstream, whose stream is chat: a chat "
        "stream cannot be turned into openai_speech (speech)"
    )
    assert upstream.seen == []


def test_a_media_client_is_served_only_by_its_own_dialect() -> None:
    with gateway("openai_speech", Reply(b"")) as (upstream, front):
        response = post(
            front,
            "/openai/v1/images/generations",
            json={"model": "gpt-image-1", "prompt": "A cat.", "stream": True},
        )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "a openai_images request is served only by an upstream of its own dialect, not by "
        "the openai_speech upstream (speech)"
    )
    assert upstream.seen == []


def test_an_upstream_error_reaches_the_sdk_in_its_shape() -> None:
    refusal = (
        b'{"error":{"message":"Incorrect API key provided: ' + CANARY.encode() + b'",'
        b'"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}'
    )
    with (
        gateway(
            "openai_transcription", Reply(refusal, status=401, content_type="application/json")
        ) as (_, front),
        pytest.raises(openai.AuthenticationError) as caught,
    ):
        list(
            sdk(front).audio.transcriptions.create(
                model="whisper-1", file=("a.wav", WAV, "audio/wav"), stream=True
            )
        )
    assert caught.value.status_code == 401
    assert CANARY not in str(caught.value.body)
    assert caught.value.body == {
        "message": "upstream: HTTP 401 authentication: Incorrect API key provided: [redacted]",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }


def test_a_media_stream_resumes_from_the_journal() -> None:
    data = fixture("openai_transcription", "normal.sse")
    with gateway("openai_transcription", Reply(data)) as (upstream, front):
        files = {"file": ("clip.wav", WAV, "audio/wav")}
        form = {"model": "whisper-1", "stream": "true"}
        first = post(front, "/openai/v1/audio/transcriptions", files=files, data=form)
        stream_id = first.headers["x-polystream-stream-id"]
        again = post(
            front,
            "/openai/v1/audio/transcriptions",
            files=files,
            data=form,
            headers={"last-event-id": f"{stream_id}.3"},
        )
    assert again.status_code == 200
    blocks = first.content.split(b"\n\n")
    assert again.content == b"\n\n".join(blocks[3:])
    assert len(upstream.seen) == 1  # (the resume is the journal's)


def test_a_relayed_request_is_retried_and_its_error_scrubbed() -> None:
    busy = Reply(
        b'{"error":{"message":"busy","type":"server_error","param":null,"code":null}}',
        status=503,
        content_type="application/json",
    )
    refusal = Reply(
        b'{"error":{"message":"Incorrect API key provided: ' + CANARY.encode() + b'",'
        b'"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}',
        status=401,
        content_type="application/json",
    )
    done = Reply(b'{"text":"Hi."}', content_type="application/json")
    with gateway("openai_transcription", busy, done) as (upstream, front):
        answer = sdk(front).audio.transcriptions.create(
            model="whisper-1", file=("a.wav", WAV, "audio/wav")
        )
    assert answer.text == "Hi."
    assert upstream.seen[0].body == upstream.seen[1].body
    with gateway("openai_transcription", refusal) as (_, front):
        response = post(
            front,
            "/openai/v1/audio/transcriptions",
            files={"file": ("a.wav", WAV, "audio/wav")},
            data={"model": "whisper-1"},
        )
    assert response.status_code == 401
    assert response.json() == {
        "error": {
            "message": "upstream: HTTP 401 authentication: Incorrect API key provided: [redacted]",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
