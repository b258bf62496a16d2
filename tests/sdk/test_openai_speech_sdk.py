"""The official ``openai`` SDK on the same bytes, for ``openai_speech``.

The installed SDK has no model for the speech stream's events: with
``stream_format="sse"``, ``audio.speech.with_streaming_response.create`` gives the body as
binary content. Here the SDK reads each fixture through a mock transport, its own SSE
reader (``openai._streaming.SSEDecoder``, what its ``Stream`` uses) parses the bytes it
hands over, and the audio (each ``speech.audio.delta``'s ``audio`` decoded) and the usage
of ``speech.audio.done`` must agree with polystream's decoder and ``rebuild``. The raw
body (no ``stream_format``) read through the SDK is the audio polystream's raw framing
gives back.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai._streaming import SSEDecoder

from polystream import decode_events, get_dialect
from polystream.events import Finish
from tests.helpers import stream_fixtures

FIXTURES = stream_fixtures("openai_speech")
SPEECH = get_dialect("openai_speech")


def _client(body: bytes, content_type: str) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/audio/speech"
        return httpx2.Response(200, headers={"content-type": content_type}, content=body)

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )


def _sdk_events(data: bytes) -> list[dict[str, Any]]:
    client = _client(data, "text/event-stream")
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", input="Hello.", voice="coral", stream_format="sse"
    ) as response:
        return [
            json.loads(sse.data)
            for sse in SSEDecoder().iter_bytes(response.iter_bytes(chunk_size=7))
        ]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_sdk_reads_the_same_audio_and_usage(path: Path) -> None:
    data = path.read_bytes()
    seen = _sdk_events(data)
    audio = b"".join(
        base64.b64decode(e["audio"]) for e in seen if e["type"] == "speech.audio.delta"
    )
    done = [e for e in seen if e["type"] == "speech.audio.done"]
    events = decode_events(data, "openai_speech")
    rebuilt = SPEECH.rebuild(events)
    assert base64.b64decode(rebuilt["audio"]) == audio
    assert audio  # every fixture has audio
    finish = events[-1]
    assert isinstance(finish, Finish)
    if done:
        assert rebuilt["usage"] == done[0]["usage"]
        assert finish.status == "completed"
    else:
        assert rebuilt["usage"] is None
        assert finish.status != "completed"
    if any(e["type"] == "error" for e in seen):
        assert finish.status == "failed"


def test_sdk_reads_the_raw_body_polystream_writes() -> None:
    events = decode_events((FIXTURES[0]).read_bytes(), "openai_speech")
    body = SPEECH.encoder(framing="raw").encode_all(events)
    client = _client(body, "audio/pcm")
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", input="Hello.", voice="coral", response_format="pcm"
    ) as response:
        got = b"".join(response.iter_bytes(chunk_size=5))
    assert got == body == base64.b64decode(SPEECH.rebuild(events)["audio"])
    decoder = SPEECH.decoder(framing="raw", content_type="audio/pcm", expected_length=len(body))
    again = decoder.feed(got) + decoder.close()
    assert SPEECH.rebuild(again)["audio"] == SPEECH.rebuild(events)["audio"]
    assert SPEECH.rebuild(again)["format"] == "pcm"
