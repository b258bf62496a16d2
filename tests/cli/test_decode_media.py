"""``polystream decode`` and media: the result's ``audio`` / ``images`` / ``transcript``,
``--audio-out`` (WAV for PCM), ``--content-type`` for a raw audio body, and the warning
when a dialect given by name recognises nothing."""

from __future__ import annotations

import base64
import io
import json
import struct
import wave
from pathlib import Path
from typing import Any

import pytest

from polystream.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
TTS = FIXTURES / "gemini_generate" / "tts.sse"
MP3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(50))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


def sawtooth(samples: int) -> bytes:
    """The samples of tests/fixtures/gemini_generate/tts.* (see make_fixtures.py)."""
    return struct.pack(f"<{samples}h", *[(k * 1100) % 16000 - 8000 for k in range(samples)])


def test_the_result_of_a_gemini_tts_stream(capsys: pytest.CaptureFixture[str]) -> None:
    status, [result], err = run(capsys, "decode", "--result", str(TTS))
    assert (status, err) == (0, "")
    assert result["audio"] == {
        "mime_type": "audio/L16;codec=pcm;rate=24000",
        "format": "pcm",
        "sample_rate": 24000,
        "channels": 1,
        "bytes": 316,
        "duration": 0.006583,
        "blocks": [0, 1, 2],
        "complete": True,
        "data": base64.b64encode(sawtooth(158)).decode(),
    }
    assert "images" not in result and "transcript" not in result


def test_audio_out_writes_pcm_as_wav(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "speech.wav"
    status, lines, err = run(capsys, "decode", "--audio-out", str(target), str(TTS))
    assert (status, err) == (0, "")
    assert lines[0]["type"] == "stream-start"  # the events are printed as usual
    with wave.open(io.BytesIO(target.read_bytes())) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (
            1,
            2,
            24000,
        )
        assert reader.readframes(reader.getnframes()) == sawtooth(158)


def test_a_raw_mp3_body_by_its_content_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "body"
    source.write_bytes(bytes(range(30)))  # no signature: the Content-Type decides
    target = tmp_path / "out.mp3"
    status, [result], err = run(
        capsys,
        "decode",
        "--result",
        "--content-type",
        "audio/mpeg",
        "--audio-out",
        str(target),
        str(source),
    )
    assert (status, err) == (0, "")
    assert (result["dialect"], result["status"]) == ("openai_speech", "completed")
    assert {k: result["audio"][k] for k in ("format", "mime_type", "bytes")} == {
        "format": "mp3",
        "mime_type": "audio/mpeg",
        "bytes": 30,
    }
    assert target.read_bytes() == bytes(range(30))  # not PCM: the bytes as they are


def test_a_raw_audio_file_is_detected_by_its_signature(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "speech.mp3"
    source.write_bytes(MP3)
    status, lines, err = run(capsys, "decode", str(source))
    assert (status, err) == (0, "")
    assert lines[1] == {
        "type": "block-start",
        "index": 0,
        "kind": "audio",
        "media": {"mime_type": "audio/mpeg", "format": "mp3", "channels": 1},
    }
    assert lines[-1]["status"] == "completed"


def test_pcm_of_an_unknown_rate_is_written_without_a_header(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # An Interactions stream whose audio is "audio/l16", without a rate.
    source = FIXTURES / "gemini_interactions" / "mcp_file_search_audio.sse"
    target = tmp_path / "out.raw"
    status, _, err = run(capsys, "decode", "--audio-out", str(target), str(source))
    assert status == 0
    assert err == (
        "polystream: warning: the PCM audio's sample rate is not stated: raw samples written "
        f"to {target}, without a WAV header\n"
    )
    assert target.read_bytes() == bytes(range(32))


def test_audio_out_without_audio_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "out.wav"
    status, lines, err = run(
        capsys,
        "decode",
        "--result",
        "--audio-out",
        str(target),
        str(FIXTURES / "openai_chat" / "reply_ok.sse"),
    )
    assert status == 1
    assert lines[0]["text"] == "OK."
    assert err == f"polystream: error: the stream has no audio: nothing written to {target}\n"
    assert not target.exists()


def test_the_result_of_images_and_transcripts(capsys: pytest.CaptureFixture[str]) -> None:
    _, [result], _ = run(capsys, "decode", "--result", str(FIXTURES / "openai_images" / "edit.sse"))
    [image] = result["images"]
    assert {k: v for k, v in image.items() if k != "data"} == {
        "index": 0,
        "mime_type": "image/png",
        "format": "png",
        "size": "1024x1536",
        "quality": "medium",
        "background": "transparent",
        "partial_images": 1,
        "final": True,
        "bytes": 73,
    }
    path = FIXTURES / "openai_transcription" / "diarized.sse"
    _, [result], _ = run(capsys, "decode", "--result", str(path))
    assert result["transcript"]["text"] == "Hello, thanks for calling. Hi, I have a question."
    assert [s["speaker"] for s in result["transcript"]["segments"]] == ["A", "B"]


def test_a_forced_dialect_that_recognises_nothing_says_what_the_stream_looks_like(
    capsys: pytest.CaptureFixture[str],
) -> None:
    speech = str(FIXTURES / "openai_speech" / "audio.sse")
    status, [result], err = run(
        capsys, "decode", "--dialect", "openai_responses", "--result", speech
    )
    assert status == 0
    assert err == (
        "polystream: warning: nothing in the input was recognised as openai_responses: it "
        "looks like openai_speech (try --dialect openai_speech or auto)\n"
    )
    assert result["error"]["message"] == (
        "stream ended without the openai_responses terminal event "
        "(the stream looks like openai_speech)"
    )
    assert result["warnings"][0]["code"] == "dialect_mismatch"
    status, _, err = run(capsys, "decode", "--dialect", "openai_responses", "--strict", speech)
    assert status == 1
    assert err == (
        "polystream: error: unknown event 'speech.audio.delta' (the stream looks like "
        "openai_speech) (dialect openai_responses, event 0, byte 0)\n"
    )
