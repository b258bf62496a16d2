"""The official ``openai`` SDK on the same bytes as polystream (transcription and image
streams).

``client.audio.transcriptions.create(file=..., model=..., stream=True)`` and
``client.images.generate(..., stream=True, partial_images=2)`` (``images.edit`` for the edit
stream) run over an ``httpx2.MockTransport`` serving each fixture's exact bytes. The SDK has
no accumulator for these streams: its typed events must carry the texts, segments, images
and usage polystream decodes, and agree with ``rebuild``. An in-band ``error`` event makes
the SDK raise ``openai.APIError`` with the event's message; a stream cut inside an event
yields the events before the cut.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from polystream import get_dialect
from polystream.events import (
    BlockEnd,
    DataDelta,
    ErrorEvent,
    Event,
    TextDelta,
    TranscriptSegment,
    UsageUpdate,
)
from tests.helpers import FIXTURES

TRANSCRIPTION = sorted((FIXTURES / "openai_transcription").glob("*.sse"))
IMAGES = sorted((FIXTURES / "openai_images").glob("*.sse"))
_SERVED: list[bytes] = [b""]
_REQUESTS: list[httpx2.Request] = []


def _handler(request: httpx2.Request) -> httpx2.Response:
    _REQUESTS.append(request)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_SERVED[0])


_CLIENT = openai.OpenAI(
    api_key="x",
    base_url="http://test/v1",
    http_client=httpx2.Client(transport=httpx2.MockTransport(_handler)),
    max_retries=0,
)


def _ours(dialect: str, data: bytes) -> list[Event]:
    decoder = get_dialect(dialect).decoder()
    return decoder.feed(data) + decoder.close()


def _sdk(call: Any, data: bytes) -> tuple[list[Any], Exception | None]:
    _SERVED[0] = data
    seen: list[Any] = []
    try:
        for event in call():
            seen.append(event)
    except openai.APIError as exc:
        return seen, exc
    return seen, None


def _transcribe() -> Any:
    return _CLIENT.audio.transcriptions.create(
        file=("a.wav", b"RIFF0000WAVE", "audio/wav"), model="gpt-4o-transcribe", stream=True
    )


@pytest.mark.parametrize("path", TRANSCRIPTION, ids=[p.name for p in TRANSCRIPTION])
def test_transcription_stream(path: Path) -> None:
    data = path.read_bytes()
    events = _ours("openai_transcription", data)
    seen, error = _sdk(_transcribe, data)
    request = _REQUESTS[-1]
    assert request.url.path == "/v1/audio/transcriptions"
    assert request.headers["content-type"].startswith("multipart/form-data")
    typed = [e for e in seen if getattr(e, "type", "").startswith("transcript.text.")]
    deltas = [e.delta for e in typed if e.type == "transcript.text.delta"]
    assert deltas == [e.delta for e in events if isinstance(e, TextDelta)]
    segments = [
        (e.id, e.start, e.end, e.speaker, e.text)
        for e in typed
        if e.type == "transcript.text.segment"
    ]
    assert segments == [
        (e.id, e.start, e.end, e.speaker, e.text)
        for e in events
        if isinstance(e, TranscriptSegment)
    ]
    ours_error = [e for e in events if isinstance(e, ErrorEvent)]
    if ours_error:
        assert isinstance(error, openai.APIError)
        assert error.message == ours_error[0].error.message
        return
    assert error is None
    done = [e for e in typed if e.type == "transcript.text.done"]
    ends = [e for e in events if isinstance(e, BlockEnd)]
    if not ends:  # truncated: the SDK yields what came before the cut, no done
        assert done == []
        return
    result = get_dialect("openai_transcription").rebuild(events)
    (final,) = done
    assert final.text == result["text"] == ends[0].value
    usage = next(e for e in events if isinstance(e, UsageUpdate)).usage
    assert final.usage is not None
    assert final.usage.model_dump(exclude_none=True) == result["usage"] == usage.raw
    if final.logprobs is not None:
        assert [lp.model_dump() for lp in final.logprobs] == result["logprobs"]


def _generate() -> Any:
    return _CLIENT.images.generate(
        model="gpt-image-1", prompt="a lighthouse", stream=True, partial_images=2
    )


def _edit() -> Any:
    return _CLIENT.images.edit(
        image=("a.png", b"\x89PNG", "image/png"),
        model="gpt-image-1",
        prompt="add a hat",
        stream=True,
        partial_images=1,
    )


@pytest.mark.parametrize("path", IMAGES, ids=[p.name for p in IMAGES])
def test_image_stream(path: Path) -> None:
    data = path.read_bytes()
    events = _ours("openai_images", data)
    edit = path.name == "edit.sse"
    seen, error = _sdk(_edit if edit else _generate, data)
    request = _REQUESTS[-1]
    if edit:
        assert request.url.path == "/v1/images/edits"
        assert request.headers["content-type"].startswith("multipart/form-data")
    else:
        assert request.url.path == "/v1/images/generations"
        assert json.loads(request.content)["partial_images"] == 2
    prefix = "image_edit." if edit else "image_generation."
    typed = [e for e in seen if getattr(e, "type", "").startswith(prefix)]
    partials = [
        (e.partial_image_index, e.b64_json) for e in typed if e.type.endswith("partial_image")
    ]
    deltas = [e for e in events if isinstance(e, DataDelta)]
    assert partials == [(d.partial, d.delta) for d in deltas if d.partial is not None]
    ours_error = [e for e in events if isinstance(e, ErrorEvent)]
    if ours_error:
        assert isinstance(error, openai.APIError)
        assert error.message == ours_error[0].error.message
        return
    assert error is None
    completed = [e for e in typed if e.type.endswith("completed")]
    result = get_dialect("openai_images").rebuild(events)
    assert [{"b64_json": e.b64_json} for e in completed] == result["data"]
    if not completed:
        return
    final = completed[-1]
    assert final.created_at == result["created"]
    assert (final.size, final.quality, final.background, final.output_format) == (
        result["size"],
        result["quality"],
        result["background"],
        result["output_format"],
    )
    assert final.usage.model_dump() == result["usage"]
