"""The emulator's media, sans-I/O: the tone, its files, the PNG, the media scenario fields,
and the requests of the media families it refuses (in the provider's shape)."""

from __future__ import annotations

import io
import itertools
import json
import math
import struct
import zlib
from pathlib import Path
from typing import Any

import av
import msgspec
import pytest

from polystream.decoding import StreamDecoder
from polystream.events import TextDelta
from polystream.scenario import Emulator, ScenarioError, _media_request, parse_scenarios
from polystream.scenario._media import PCM_RATE, audio_file, png, tone, tone_frequency

FIXTURES = Path(__file__).parent / "fixtures"


def read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """A PNG's width, height and pixel rows, every chunk's CRC checked (8-bit RGB, no
    filter: what the emulator writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at = 8
    chunks: list[tuple[bytes, bytes]] = []
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        at += 12 + length
    assert [kind for kind, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1]
    )
    assert (depth, colour, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(chunks[1][1])
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    rows = [raw[y * stride : (y + 1) * stride] for y in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, [row[1:] for row in rows]


def crossings(pcm: bytes) -> int:
    samples = [v for (v,) in struct.iter_unpack("<h", pcm)]
    return sum(1 for a, b in itertools.pairwise(samples) if a < 0 <= b)


def test_the_tone_is_a_sine_at_the_texts_frequency_for_its_length() -> None:
    pcm = tone("Hello there")
    assert len(pcm) == 2 * round(11 * 0.05 * PCM_RATE)  # 50 ms a character
    assert pcm == tone("Hello there")  # deterministic
    frequency = tone_frequency("Hello there")
    assert 220 <= frequency < 660
    # One upward zero crossing a period: the frequency, within a period.
    assert abs(crossings(pcm) - frequency * 0.55) <= 1
    samples = [v for (v,) in struct.iter_unpack("<h", pcm)]
    assert samples[0] == 0 and max(samples) == pytest.approx(0.3 * 32767, abs=1)
    short = tone("x", frequency=1000.0, seconds=0.5)
    assert len(short) == PCM_RATE and abs(crossings(short) - 500) <= 1
    assert len(tone("y" * 10_000)) == 2 * 20 * PCM_RATE  # at most 20 s


def test_wav_is_the_pcm_with_its_riff_header() -> None:
    pcm = tone("wave")
    data = audio_file(pcm, "wav")
    assert data[44:] == pcm
    assert struct.unpack("<4sI4s4sIHHIIHH4sI", data[:44]) == (
        b"RIFF",
        36 + len(pcm),
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        24000,
        48000,
        2,
        16,
        b"data",
        len(pcm),
    )
    assert audio_file(pcm, "pcm") is pcm


@pytest.mark.parametrize(
    ("audio_format", "codec", "rate"),
    [
        ("mp3", "mp3float", 24000),
        ("opus", "opus", 48000),
        ("aac", "aac", 24000),
        ("flac", "flac", 24000),
    ],
)
def test_compressed_formats_decode_to_the_tones_length(
    audio_format: str, codec: str, rate: int
) -> None:
    pcm = tone("compressed", seconds=0.5)
    data = audio_file(pcm, audio_format)
    assert data == audio_file(pcm, audio_format)  # bit-exact: the same bytes every run
    with av.open(io.BytesIO(data)) as file:
        stream = file.streams.audio[0]
        samples = sum(frame.samples for frame in file.decode(stream))
        assert (stream.codec_context.name, stream.codec_context.sample_rate) == (codec, rate)
    # Encoders pad the start and the end; the decoded length is the tone's, give or take
    # a frame or two of the codec.
    assert abs(samples - 0.5 * rate) <= 0.1 * rate


def test_the_png_is_valid_and_follows_the_text() -> None:
    data = png("a red fox", 40, 30)
    width, height, rows = read_png(data)
    assert (width, height) == (40, 30)
    assert data == png("a red fox", 40, 30) != png("a blue fox", 40, 30)
    assert all(len({row[i : i + 3] for i in range(0, len(row), 3)}) == 1 for row in rows)
    assert len(set(rows)) > 2  # a gradient, in bands
    _, _, partial = read_png(png("a red fox", 40, 30, shown=0.5))
    assert partial[:15] == rows[:15]
    assert set(partial[15:]) == {b"\x80" * 120}
    with pytest.raises(ValueError, match="out of range"):
        png("x", 0, 10)


def test_media_fields_of_a_scenario_are_checked() -> None:
    parsed = parse_scenarios(
        {"reply": {"audio": {"frequency": 440, "seconds": 1, "chunk": 600}, "image": True}}
    )
    assert parsed[0].reply is not None and parsed[0].reply.image is True
    for bad in (
        {"audio": {"frequency": 5}},
        {"audio": {"seconds": 0}},
        {"audio": {"seconds": 21}},
        {"audio": {"chunk": 100}},
        {"image": {"width": 0}},
        {"image": {"partial_images": 4}},
        {"segments": [{"speaker": "A"}]},
    ):
        with pytest.raises(ScenarioError):
            parse_scenarios({"reply": bad})


def body_of(answer: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(b"".join(chunk.data for chunk in answer.plan.chunks))
    return data


SPEECH = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": "Hi"}


@pytest.mark.parametrize(
    ("dialect", "body", "status", "error"),
    [
        (
            "openai_speech",
            {**SPEECH, "response_format": "ogg"},
            400,
            {
                "message": "Invalid value: 'ogg'. Supported values are: 'mp3', 'opus', 'aac', "
                "'flac', 'wav', 'pcm'.",
                "type": "invalid_request_error",
                "param": "response_format",
                "code": "invalid_value",
            },
        ),
        (
            "openai_speech",
            {"model": "gpt-4o-mini-tts", "input": "Hi"},
            400,
            {
                "message": "Missing required parameter: 'voice'.",
                "type": "invalid_request_error",
                "param": "voice",
                "code": "missing_required_parameter",
            },
        ),
        (
            "openai_speech",
            {**SPEECH, "model": "speechify-2"},
            404,
            {
                "message": "The model `speechify-2` does not exist or you do not have access "
                "to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            },
        ),
        (
            "openai_images",
            {"model": "gpt-image-1", "prompt": "x", "output_format": "webp"},
            400,
            {
                "message": "The emulator writes 'png' images only, not 'webp'.",
                "type": "invalid_request_error",
                "param": "output_format",
                "code": "invalid_value",
            },
        ),
        (
            "openai_images",
            {"model": "gpt-image-1", "prompt": "x", "partial_images": 4},
            400,
            {
                "message": "Invalid 'partial_images': expected an integer from 0 to 3.",
                "type": "invalid_request_error",
                "param": "partial_images",
                "code": "invalid_value",
            },
        ),
    ],
)
def test_a_refused_media_request_gets_the_providers_error(
    dialect: str, body: dict[str, Any], status: int, error: dict[str, Any]
) -> None:
    answer = Emulator().answer(dialect, msgspec.json.encode(body))
    assert answer.status == status
    assert body_of(answer) == {"error": error}


def test_a_transcription_takes_a_file_and_the_formats_the_emulator_answers() -> None:
    emulator = Emulator()
    no_file = emulator.answer("openai_transcription", b"", form={"model": "gpt-4o-transcribe"})
    assert no_file.status == 400
    assert body_of(no_file)["error"]["param"] == "file"
    upload = {"filename": "a.wav", "content_type": "audio/wav", "size": 10}
    srt = emulator.answer(
        "openai_transcription",
        b"",
        form={"model": "whisper-1", "file": upload, "response_format": "srt"},
    )
    assert srt.status == 400
    assert body_of(srt)["error"]["message"] == (
        "The emulator answers response_format 'json', 'text' and 'diarized_json', not 'srt'."
    )
    text = emulator.answer(
        "openai_transcription",
        b"",
        form={"model": "whisper-1", "file": upload, "response_format": "text"},
    )
    assert text.status == 200 and text.headers["content-type"] == "text/plain; charset=utf-8"
    assert b"".join(c.data for c in text.plan.chunks) == b"Emulated reply from whisper-1."


def test_compressed_speech_without_pyav_is_refused_naming_what_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_media_request, "compressed_available", lambda: False)
    answer = Emulator().answer("openai_speech", msgspec.json.encode(SPEECH))
    assert answer.status == 400
    assert body_of(answer)["error"]["message"] == (
        "The emulator writes mp3 audio with PyAV, which is not installed (pip install "
        "'polystream[audio]'); without it it writes 'wav' and 'pcm'."
    )
    wav = Emulator().answer(
        "openai_speech", msgspec.json.encode({**SPEECH, "response_format": "wav"})
    )
    assert wav.status == 200 and wav.headers["content-type"] == "audio/wav"
    assert b"".join(c.data for c in wav.plan.chunks) == audio_file(tone("Hi"), "wav")


def test_raw_speech_cannot_carry_an_in_band_error_so_it_fails_with_a_status() -> None:
    emulator = Emulator(parse_scenarios({"faults": {"error": {"kind": "rate_limit"}}}))
    answer = emulator.answer("openai_speech", msgspec.json.encode(SPEECH))
    assert answer.status == 429
    assert body_of(answer)["error"]["code"] == "rate_limit_exceeded"


def test_speech_usage_counts_the_input_and_the_seconds() -> None:
    answer = Emulator().answer(
        "openai_speech",
        msgspec.json.encode({**SPEECH, "input": "Hello there", "stream_format": "sse"}),
    )
    frames = b"".join(c.data for c in answer.plan.chunks).split(b"\n\n")
    done = json.loads(frames[-2].removeprefix(b"data: "))
    # 11 characters: 3 input tokens; 0.55 s of audio: 14 tokens (25 a second).
    assert done == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 3, "output_tokens": 14, "total_tokens": 17},
    }
    assert math.ceil(0.55 * 25) == 14


def test_replayed_captures_answer_sessions_but_not_media() -> None:
    capture = (FIXTURES / "openai_chat" / "reply_ok.sse").read_bytes()
    emulator = Emulator(replays=[capture])
    wav = emulator.answer(
        "openai_speech", msgspec.json.encode({**SPEECH, "response_format": "wav"})
    )
    assert b"".join(c.data for c in wav.plan.chunks) == audio_file(tone("Hi"), "wav")
    turn = emulator.answer(
        "openai_agent_session",
        msgspec.json.encode({"agent": {"model": "gpt-5.4-mini"}, "input": "x", "stream": True}),
    )
    deltas = [
        json.loads(line.removeprefix(b"data: "))["delta"]
        for chunk in turn.plan.chunks
        for line in chunk.data.splitlines()
        if b'"agent.session.turn.output_text.delta"' in line
    ]
    decoder = StreamDecoder("openai_chat")
    texts = [e.delta for e in decoder.feed(capture) + decoder.close() if isinstance(e, TextDelta)]
    assert deltas == texts and deltas
