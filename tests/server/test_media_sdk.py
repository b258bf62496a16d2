"""The official SDKs against the emulator's media endpoints, over loopback: OpenAI speech
(SSE and the raw audio file), transcriptions (multipart, streamed with logprobs, diarized,
unary), image generation and edits (streamed partial images, unary), and Gemini audio out
(``responseModalities: ["AUDIO"]``), with one fault each."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator

import httpx2
import openai
import pytest
from google import genai
from google.genai import types

from polystream.decoding import StreamDecoder
from polystream.events import DataDelta, Finish
from polystream.scenario import Emulator
from polystream.scenario._media import PCM_MIME, audio_file, png, tone
from polystream.server import ServerThread
from tests.server.support import track
from tests.test_scenario_media import read_png

TEXT = "Hello there"
UPLOAD = ("speech.wav", audio_file(tone("to transcribe", seconds=0.2), "wav"), "audio/wav")


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerThread]:
    """One emulator with default replies for the tests that need no scenario."""
    with ServerThread(Emulator()) as server:
        yield server


def oai(server: ServerThread) -> openai.OpenAI:
    return track(openai.OpenAI(api_key="x", base_url=server.base_url + "/openai/v1", max_retries=0))


def decoded(dialect: str, body: bytes, **options: object) -> list[object]:
    decoder = StreamDecoder(dialect, **options)  # type: ignore[arg-type]
    return decoder.feed(body) + decoder.close()


# -- speech ------------------------------------------------------------------------------


def test_speech_sse_streams_the_audio_file_in_deltas(plain: ServerThread) -> None:
    sdk = oai(plain)
    with sdk.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=TEXT, stream_format="sse"
    ) as response:
        assert response.headers["content-type"] == "text/event-stream"
        body = response.read()
    events = decoded("openai_speech", body)
    deltas = [e for e in events if isinstance(e, DataDelta)]
    assert len(deltas) == 1  # (the mp3 of 0.55 s fits one 4800-byte delta)
    audio = b"".join(base64.b64decode(d.delta) for d in deltas)
    assert audio == audio_file(tone(TEXT), "mp3")  # the response_format's default
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "completed"
    assert finish.usage is not None and finish.usage.output_tokens == 14


@pytest.mark.parametrize(
    ("audio_format", "content_type"),
    [("wav", "audio/wav"), ("pcm", "audio/pcm"), ("mp3", "audio/mpeg"), ("flac", "audio/flac")],
)
def test_speech_without_stream_format_is_the_audio_file(
    plain: ServerThread, audio_format: str, content_type: str
) -> None:
    sdk = oai(plain)
    with sdk.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format=audio_format
    ) as response:
        assert response.headers["content-type"] == content_type
        data = b"".join(response.iter_bytes())
    assert data == audio_file(tone(TEXT), audio_format)


def test_speech_sse_in_band_error_fault(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"error": {"after": 2, "kind": "server", "message": "boom"}}}])
    with oai(server).audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="alloy",
        input="A longer sentence, to be cut.",
        response_format="pcm",
        stream_format="sse",
    ) as response:
        body = response.read()
    events = decoded("openai_speech", body)
    assert len([e for e in events if isinstance(e, DataDelta)]) == 2
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.status == "failed"
    assert finish.error is not None and finish.error.message == "boom"


# -- transcription -------------------------------------------------------------------------


def test_transcription_stream_with_logprobs(plain: ServerThread) -> None:
    stream = oai(plain).audio.transcriptions.create(
        file=UPLOAD, model="gpt-4o-transcribe", stream=True, include=["logprobs"]
    )
    events = list(stream)
    expected = "Emulated reply from gpt-4o-transcribe."
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert [d.delta for d in deltas] == ["Emulated", " reply", " from", " gpt-4o-transcribe."]
    for delta in deltas:
        assert delta.logprobs is not None and len(delta.logprobs) == 1
        entry = delta.logprobs[0]
        assert entry.token == delta.delta and entry.bytes == list(delta.delta.encode())
        assert entry.logprob is not None and -0.01 < entry.logprob < 0
    done = events[-1]
    assert done.type == "transcript.text.done" and done.text == expected
    assert done.logprobs is not None
    assert [p.model_dump() for p in done.logprobs] == [
        d.logprobs[0].model_dump() for d in deltas if d.logprobs
    ]
    assert done.usage is not None and done.usage.type == "tokens"
    # The upload is 9,644 bytes: 9 audio tokens (one a KiB); the text 10 output tokens.
    assert (done.usage.input_tokens, done.usage.output_tokens) == (9, 10)


def test_transcription_diarized_segments(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"reply": {"text": "Hello there. How are you?"}}])
    events = list(
        oai(server).audio.transcriptions.create(
            file=UPLOAD,
            model="gpt-4o-transcribe-diarize",
            response_format="diarized_json",
            chunking_strategy="auto",
            stream=True,
        )
    )
    segments = [e for e in events if e.type == "transcript.text.segment"]
    assert [(s.id, s.speaker, s.text, s.start, s.end) for s in segments] == [
        ("seg_0", "A", "Hello there.", 0.0, 0.8),
        ("seg_1", "A", "How are you?", 0.8, 2.0),
    ]
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert {d.segment_id for d in deltas} == {"seg_0", "seg_1"}
    assert events[-1].type == "transcript.text.done"
    assert events[-1].text == "".join(d.delta for d in deltas) == "Hello there. How are you?"


def test_transcription_unary_json_and_text(plain: ServerThread) -> None:
    sdk = oai(plain)
    result = sdk.audio.transcriptions.create(file=UPLOAD, model="whisper-1")
    assert result.text == "Emulated reply from whisper-1."
    text = sdk.audio.transcriptions.create(file=UPLOAD, model="whisper-1", response_format="text")
    assert text == "Emulated reply from whisper-1."


def test_transcription_in_band_error_fault(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"error": {"after": 1, "kind": "overloaded"}}}])
    stream = oai(server).audio.transcriptions.create(
        file=UPLOAD, model="gpt-4o-transcribe", stream=True
    )
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="Overloaded"):
        for event in stream:
            seen.append(event.type)
    assert seen == ["transcript.text.delta"]


def test_a_malformed_form_is_refused_in_openais_shape(plain: ServerThread) -> None:
    reply = httpx2.post(
        plain.base_url + "/openai/v1/audio/transcriptions",
        content=b"--b\r\nnot a part",
        headers={"content-type": "multipart/form-data"},
    )
    assert reply.status_code == 400
    assert reply.json() == {
        "error": {
            "message": "the multipart/form-data Content-Type has no boundary",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


# -- images ----------------------------------------------------------------------------------


def test_image_generation_streams_partial_images_then_the_image(plain: ServerThread) -> None:
    events = list(
        oai(plain).images.generate(
            model="gpt-image-1", prompt="a red fox", stream=True, partial_images=2, size="48x32"
        )
    )
    assert [e.type for e in events] == [
        "image_generation.partial_image",
        "image_generation.partial_image",
        "image_generation.completed",
    ]
    partials, final = events[:2], events[2]
    assert [p.partial_image_index for p in partials] == [0, 1]
    last = base64.b64decode(final.b64_json)
    assert last == png("a red fox", 48, 32)
    _, _, rows = read_png(last)
    for number, partial in enumerate(partials):
        width, height, shown = read_png(base64.b64decode(partial.b64_json))
        assert (width, height) == (48, 32)
        drawn = round(32 * (number + 1) / 3)
        assert shown[:drawn] == rows[:drawn] and set(shown[drawn:]) == {b"\x80" * 144}
    assert (final.size, final.output_format, final.quality, final.background) == (
        "48x32",
        "png",
        "auto",
        "auto",
    )
    assert final.usage.output_tokens == 2 and final.usage.input_tokens_details.text_tokens == 3


def test_image_edit_streams_the_edit_events(plain: ServerThread) -> None:
    source = png("source", 8, 8)
    events = list(
        oai(plain).images.edit(
            model="gpt-image-1",
            image=("in.png", source, "image/png"),
            prompt="make it blue",
            stream=True,
            partial_images=1,
            size="16x16",
        )
    )
    assert [e.type for e in events] == ["image_edit.partial_image", "image_edit.completed"]
    assert base64.b64decode(events[1].b64_json) == png("make it blue", 16, 16)


def test_image_generation_unary_holds_n_images(plain: ServerThread) -> None:
    result = oai(plain).images.generate(model="gpt-image-1", prompt="two cats", n=2, size="8x8")
    assert result.data is not None
    assert [base64.b64decode(d.b64_json or "") for d in result.data] == [
        png("two cats", 8, 8),
        png("two cats\n1", 8, 8),
    ]
    assert result.size == "8x8" and result.output_format == "png"


def test_image_stream_dropped_fault(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"drop_at_event": 1}}])
    stream = oai(server).images.generate(
        model="gpt-image-1", prompt="cut", stream=True, partial_images=1, size="8x8"
    )
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        for event in stream:
            seen.append(event.type)
    assert seen == ["image_generation.partial_image"]


# -- Gemini audio out ------------------------------------------------------------------------

TTS = "gemini-2.5-flash-preview-tts"
SPEECH_CONFIG = types.GenerateContentConfig(
    response_modalities=["AUDIO"],
    speech_config=types.SpeechConfig(
        voice_config=types.VoiceConfig(
            prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name="Kore")
        )
    ),
)


def gemini(server: ServerThread) -> genai.Client:
    return track(
        genai.Client(
            api_key="x", http_options=types.HttpOptions(base_url=server.base_url + "/gemini")
        )
    )


def test_gemini_tts_streams_pcm_inline_data(plain: ServerThread) -> None:
    chunks = list(
        gemini(plain).models.generate_content_stream(
            model=TTS, contents="Say cheerfully: have a wonderful day!", config=SPEECH_CONFIG
        )
    )
    blobs = [
        part.inline_data
        for chunk in chunks
        for candidate in chunk.candidates or []
        for part in (candidate.content.parts or [] if candidate.content else [])
        if part.inline_data is not None
    ]
    assert {blob.mime_type for blob in blobs} == {PCM_MIME}
    pcm = b"".join(blob.data or b"" for blob in blobs)
    assert pcm == tone("Say cheerfully: have a wonderful day!")
    assert [len(blob.data or b"") for blob in blobs[:-1]] == [4800] * (len(blobs) - 1)
    last = chunks[-1]
    assert last.candidates is not None and last.candidates[0].finish_reason == "STOP"
    assert last.usage_metadata is not None
    assert last.usage_metadata.candidates_token_count == 47  # 1.85 s at 25 tokens a second


def test_gemini_tts_dropped_fault(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"faults": {"drop_at_event": 2}}])
    seen = 0
    with pytest.raises(httpx2.RemoteProtocolError):
        for _ in gemini(server).models.generate_content_stream(
            model=TTS, contents="a long enough line to need several chunks", config=SPEECH_CONFIG
        ):
            seen += 1
    assert seen == 2


def test_gemini_tts_unary_joins_the_audio(plain: ServerThread) -> None:
    reply = gemini(plain).models.generate_content(
        model=TTS, contents="Say hi there", config=SPEECH_CONFIG
    )
    assert reply.candidates is not None and reply.candidates[0].content is not None
    parts = reply.candidates[0].content.parts or []
    assert [(p.inline_data.mime_type, p.inline_data.data) for p in parts if p.inline_data] == [
        (PCM_MIME, tone("Say hi there"))
    ]


def test_a_scenario_image_in_a_gemini_reply(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"reply": {"text": "Here.", "image": {"width": 8, "height": 4}}}])
    reply = gemini(server).models.generate_content(
        model="gemini-2.5-flash-image", contents="draw a cat"
    )
    assert reply.candidates is not None and reply.candidates[0].content is not None
    parts = reply.candidates[0].content.parts or []
    assert parts[0].text == "Here."
    image = parts[1].inline_data
    assert image is not None and image.mime_type == "image/png"
    assert image.data == png("draw a cat", 8, 4)
