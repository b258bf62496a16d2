"""``openai_images``: exact events, both vocabularies, bad input in strict and tolerant mode,
the encoder's losses from another dialect, ``rebuild`` and the body / form codec."""

from __future__ import annotations

import pytest

from polystream import get_dialect
from polystream.dialects._detect import detect
from polystream.dialects.openai_images import rebuild
from polystream.errors import RemoteProtocolError, RequestError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    Finish,
    FinishReason,
    MediaInfo,
    StreamStart,
    TextDelta,
    Usage,
    UsageUpdate,
)
from polystream.request.codecs import build_request, parse_request
from tests.helpers import FIXTURES

DIALECT = "openai_images"
MEDIA = MediaInfo(
    mime_type="image/png", format="png", size="1024x1024", quality="low", background="opaque"
)


def _decode(data: bytes, **options: object) -> list[object]:
    decoder = get_dialect(DIALECT).decoder(**options)
    return decoder.feed(data) + decoder.close()


def test_generation_with_two_partials() -> None:
    events = _decode((FIXTURES / DIALECT / "generation.sse").read_bytes())
    assert events[:2] == [
        StreamStart(dialect=DIALECT, created=1764874800),
        BlockStart(index=0, kind="image", media=MEDIA),
    ]
    deltas = [e for e in events if isinstance(e, DataDelta)]
    assert [(d.partial, d.replace, d.mime_type) for d in deltas] == [
        (0, True, "image/png"),
        (1, True, "image/png"),
        (None, True, "image/png"),
    ]
    assert all(d.delta.startswith("iVBORw0KGgo") for d in deltas)  # PNG
    assert isinstance(events[-3], UsageUpdate) and events[-3].usage.output_tokens == 272
    assert events[-2] == BlockEnd(index=0)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "completed"
    assert finish.reason == FinishReason(unified="stop")
    result = rebuild(events)
    assert result == {
        "created": 1764874802,
        "data": [{"b64_json": deltas[-1].delta}],
        "background": "opaque",
        "output_format": "png",
        "quality": "low",
        "size": "1024x1024",
        "usage": {
            "input_tokens": 14,
            "input_tokens_details": {"image_tokens": 0, "text_tokens": 14},
            "output_tokens": 272,
            "total_tokens": 286,
        },
    }


def test_an_edit_stream_keeps_its_vocabulary() -> None:
    data = (FIXTURES / DIALECT / "edit.sse").read_bytes()
    events = _decode(data)
    start = events[1]
    assert isinstance(start, BlockStart) and start.extra == {"operation": "edit"}
    assert get_dialect(DIALECT).encoder().encode_all(events) == data


def test_mixed_vocabularies_are_a_protocol_error() -> None:
    data = (
        (FIXTURES / DIALECT / "edit.sse")
        .read_bytes()
        .replace(b"image_edit.completed", b"image_generation.completed")
    )
    with pytest.raises(RemoteProtocolError, match="inside an image_edit stream") as info:
        _decode(data, strict=True)
    assert (info.value.dialect, info.value.event_index) == (DIALECT, 1)


def test_in_band_error_fails_the_stream() -> None:
    events = _decode((FIXTURES / DIALECT / "error.sse").read_bytes())
    error = events[-2]
    assert isinstance(error, ErrorEvent)
    assert (error.error.kind, error.error.code) == ("content_filter", "moderation_blocked")
    assert isinstance(events[-1], Finish) and events[-1].status == "failed"


def test_partials_without_completed_are_truncated() -> None:
    data = (FIXTURES / DIALECT / "generation.sse").read_bytes()
    cut = data[: data.index(b"event: image_generation.completed")]
    finish = _decode(cut)[-1]
    assert isinstance(finish, Finish) and finish.status == "truncated"


def test_unknown_event_strict() -> None:
    data = b'event: image_generation.moderation\ndata: {"type":"image_generation.moderation"}\n\n'
    assert detect(data) == (DIALECT, "sse")
    with pytest.raises(RemoteProtocolError, match="unknown event"):
        _decode(data, strict=True)


def test_detection_of_both_vocabularies() -> None:
    for name in (b"image_generation.partial_image", b"image_edit.completed"):
        data = b'data: {"type":"' + name + b'","b64_json":""}\n\n'
        assert detect(data) == (DIALECT, "sse")


def test_a_text_stream_into_images_reports_its_losses() -> None:
    events = [
        StreamStart(dialect="openai_chat"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="no image here"),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    encoder = get_dialect(DIALECT).encoder()
    # The source completed: an empty image ends the stream whole, and says so.
    assert encoder.encode_all(events) == (
        b"event: image_generation.completed\n"
        b'data: {"type":"image_generation.completed","b64_json":"","created_at":0,'
        b'"size":"auto","quality":"auto","background":"auto","output_format":"png"}\n\n'
    )
    assert [(loss.what, loss.event_index) for loss in encoder.losses] == [
        ("block:text", 1),
        ("image", 4),
    ]


def test_a_foreign_image_block_is_written_in_the_generation_vocabulary() -> None:
    events = [
        StreamStart(dialect="openai_responses", created=7),
        BlockStart(index=0, kind="image", media=MediaInfo(mime_type="image/png")),
        DataDelta(index=0, delta="AAA", replace=True, partial=0),
        DataDelta(index=0, delta="BBB", replace=True),
        BlockEnd(index=0),
        UsageUpdate(usage=Usage(input_tokens=1, output_tokens=2)),
        Finish(status="completed", reason=FinishReason(unified="stop")),
    ]
    encoder = get_dialect(DIALECT).encoder()
    assert encoder.encode_all(events) == (
        b"event: image_generation.partial_image\n"
        b'data: {"type":"image_generation.partial_image","b64_json":"AAA","created_at":7,'
        b'"size":"auto","quality":"auto","background":"auto","output_format":"png",'
        b'"partial_image_index":0}\n\n'
        b"event: image_generation.completed\n"
        b'data: {"type":"image_generation.completed","b64_json":"BBB","created_at":7,'
        b'"size":"auto","quality":"auto","background":"auto","output_format":"png",'
        b'"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}\n\n'
    )
    assert encoder.losses == []


def test_a_truncated_source_does_not_complete_its_image() -> None:
    events = [
        StreamStart(dialect="openai_responses"),
        BlockStart(index=0, kind="image"),
        DataDelta(index=0, delta="BBB"),
        Finish(status="truncated", reason=FinishReason(unified="error")),
    ]
    encoder = get_dialect(DIALECT).encoder()
    assert encoder.encode_all(events) == b""
    assert [loss.what for loss in encoder.losses] == ["image"]


def test_the_codec_reads_a_generation_body_and_an_edit_form() -> None:
    body = {"model": "gpt-image-1", "prompt": "a cat", "stream": True, "partial_images": 2}
    request = parse_request(DIALECT, body)
    assert request.last_user_text() == "a cat"
    assert request.extra == {"partial_images": 2}
    native = build_request(DIALECT, request)
    assert (native.path, native.body) == ("/images/generations", body)
    form = {
        "image": {"filename": "a.png", "content_type": "image/png", "size": 99},
        "prompt": "add a hat",
        "model": "gpt-image-1",
        "stream": "true",
        "partial_images": "1",
    }
    native = build_request(DIALECT, parse_request(DIALECT, form))
    assert (native.path, native.body) == ("/images/edits", form)
    with pytest.raises(RequestError) as info:
        parse_request(DIALECT, {"model": "gpt-image-1"})
    assert info.value.param == "prompt"
