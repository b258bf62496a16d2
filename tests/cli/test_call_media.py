"""`polystream call` for the media and agent-session dialects, through ``main(argv)``,
against a loopback upstream replaying fixture bytes: speech written to ``--out`` (SSE
and raw), a transcription's text, images written (partials shown), a session's stream."""

from __future__ import annotations

import base64
from pathlib import Path

import msgspec
import pytest

from polystream.cli import main
from polystream.wire.multipart import decode_form
from tests.gateway.replay import Reply, replaying
from tests.helpers import FIXTURES

WAV = b"RIFF\x24\x20\x00\x00WAVEfmt " + bytes(range(256)) * 30


def call(base: str, *argv: str) -> int:
    return main(["call", *argv, "--api-key", "k", "--base-url", base])


def datas(path: Path, key: str) -> list[str]:
    """The ``key`` of each ``data:`` object of a fixture."""
    lines = path.read_bytes().split(b"\n")
    objects = [msgspec.json.decode(line[6:]) for line in lines if line.startswith(b"data: ")]
    return [o[key] for o in objects if key in o]


def test_speech_is_written_to_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = FIXTURES / "openai_speech" / "audio.sse"
    out = tmp_path / "speech.pcm"
    with replaying(Reply(fixture.read_bytes())) as (upstream, server):
        status = call(
            server.base_url + "/v1",
            "openai_speech",
            "--model",
            "gpt-4o-mini-tts",
            "--input",
            "Hello.",
            "--voice",
            "alloy",
            "--out",
            str(out),
        )
    err = capsys.readouterr().err
    assert status == 0, err
    audio = b"".join(base64.b64decode(a) for a in datas(fixture, "audio"))
    assert out.read_bytes() == audio
    assert f"wrote {len(audio)} bytes of audio to {out}\n" in err
    assert msgspec.json.decode(upstream.seen[0].body) == {
        "input": "Hello.",
        "model": "gpt-4o-mini-tts",
        "voice": "alloy",
        "response_format": "pcm",  # (--out's extension)
        "stream_format": "sse",
    }


def test_raw_speech_is_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "speech.wav"
    reply = Reply(WAV, content_type="audio/wav", length=True)
    with replaying(reply) as (upstream, server):
        status = call(
            server.base_url + "/v1",
            "openai_speech",
            "Hello.",
            "--model",
            "tts-1",
            "--raw",
            "--out",
            str(out),
        )
    err = capsys.readouterr().err
    assert status == 0, err
    assert out.read_bytes() == WAV
    assert f"wrote {len(WAV)} bytes of audio (wav) to {out}\n" in err
    assert msgspec.json.decode(upstream.seen[0].body) == {
        "input": "Hello.",
        "model": "tts-1",
        "response_format": "wav",
    }


def test_a_transcription_prints_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audio = tmp_path / "clip.wav"
    audio.write_bytes(WAV)
    fixture = FIXTURES / "openai_transcription" / "normal.sse"
    with replaying(Reply(fixture.read_bytes())) as (upstream, server):
        status = call(
            server.base_url + "/v1",
            "openai_transcription",
            "--model",
            "gpt-4o-transcribe",
            "--file",
            str(audio),
            "--field",
            "language=en",
        )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert captured.out == "The quick brown fox jumps.\n"
    assert captured.err.startswith("-- completed (stop); tokens in 22 out 6; first event ")
    form = decode_form(upstream.seen[0].headers["content-type"], upstream.seen[0].body)
    assert form.fields == {
        "language": "en",
        "file": {"filename": "clip.wav", "content_type": "audio/x-wav", "size": len(WAV)},
        "model": "gpt-4o-transcribe",
        "stream": "true",
    }
    assert form.files == {"file": WAV}


def test_images_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = FIXTURES / "openai_images" / "generation.sse"
    out = tmp_path / "image.png"
    with replaying(Reply(fixture.read_bytes())) as (upstream, server):
        status = call(
            server.base_url + "/v1",
            "openai_images",
            "A blue square.",
            "--model",
            "gpt-image-1",
            "--out",
            str(out),
            "--field",
            "partial_images=2",
        )
    err = capsys.readouterr().err
    assert status == 0, err
    images = [base64.b64decode(b) for b in datas(fixture, "b64_json")]
    assert out.read_bytes() == images[2]
    assert err.splitlines()[:3] == [
        f"[partial image 0: {len(images[0])} bytes]",
        f"[partial image 1: {len(images[1])} bytes]",
        f"wrote {len(images[2])} bytes of image (png) to {out}",
    ]
    assert msgspec.json.decode(upstream.seen[0].body) == {
        "partial_images": 2,
        "prompt": "A blue square.",
        "model": "gpt-image-1",
        "stream": True,
    }


def test_a_session_is_streamed(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = FIXTURES / "anthropic_agent_session" / "session.sse"

    def plan(method: str, path: str) -> Reply:
        if method == "GET":
            return Reply(fixture.read_bytes())
        return Reply(b"{}", content_type="application/json")

    with replaying(plan=plan) as (upstream, server):
        status = call(
            server.base_url,
            "anthropic_agent_session",
            "Which file is largest?",
            "--model",
            "claude-sonnet-5-5",
            "--session",
            "sesn_1",
        )
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "I'll look for Python files first." in captured.out
    assert [(s.method, s.path) for s in upstream.seen] == [
        ("GET", "/v1/sessions/sesn_1/events/stream"),
        ("POST", "/v1/sessions/sesn_1/events"),
    ]


def test_a_file_for_a_dialect_that_takes_none(capsys: pytest.CaptureFixture[str]) -> None:
    status = call("http://127.0.0.1:9/v1", "openai_speech", "Hi.", "--model", "m", "--file", "x")
    assert status == 2
    assert capsys.readouterr().err == "polystream: error: openai_speech takes no file (--file)\n"
