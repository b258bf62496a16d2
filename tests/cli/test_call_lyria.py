"""`polystream call gemini_lyria ... --seconds N --out FILE.wav` against the emulator:
the music's first N seconds written as a WAV file, exactly the emulator's tone; a
prompt a scenario filters fails the call; ``--seconds`` is refused for an HTTP call."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from polystream.audio import AudioFormat, read_wav
from polystream.cli import main
from polystream.scenario import Emulator
from polystream.scenario._format import Faults, HttpError, Match, Scenario, Timing
from polystream.server import ServerThread
from tests.server.test_gemini_lyria import expected

MODEL = "models/lyria-realtime-exp"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    scenarios = [
        Scenario(
            match=Match(dialect="gemini_lyria", contains="violence"),
            faults=Faults(http_error=HttpError(status=400, message="Blocked.")),
        ),
        Scenario(match=Match(dialect="gemini_lyria"), timing=Timing(audio_delay=0.01)),
    ]
    with ServerThread(Emulator(scenarios)) as server:
        yield server.base_url + "/gemini"


def call(base: str, prompt: str, *argv: str) -> int:
    return main(["call", "gemini_lyria", "--model", MODEL, prompt, "--base-url", base, *argv])


def test_the_music_is_written_as_wav(
    base: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "music.wav"
    assert call(base, "calm piano", "--seconds", "2", "--out", str(out)) == 0
    fmt, pcm = read_wav(out.read_bytes())
    assert fmt == AudioFormat("pcm16", 48000, 2)
    assert pcm == expected([("calm piano", 1.0)], 0, 2 * 48000)
    err = capsys.readouterr().err
    assert f"wrote {len(pcm) + 44} bytes of audio (pcm, 48000 Hz, 2 channel(s), as WAV)" in err
    assert re.search(r"-- incomplete \(PAUSE\); first event \d+ ms, total \d+ ms\n$", err)


def test_a_filtered_prompt_fails_the_call(
    base: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "none.wav"
    assert call(base, "a song about violence", "--seconds", "1", "--out", str(out)) == 1
    err = capsys.readouterr().err
    assert "[error content_filter] the prompt 'a song about violence' was filtered: Blocked." in err
    assert not out.exists()


def test_seconds_is_for_a_realtime_turn(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["call", "openai", "--model", "gpt-5", "hi", "--seconds", "1"]
    assert main([*argv, "--base-url", "http://127.0.0.1:9/openai/v1"]) == 2
    assert "--seconds is for a realtime turn" in capsys.readouterr().err


def test_music_needs_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["call", "gemini_lyria", "--model", MODEL, "jazz", "--api-key", "k"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "polystream: error: gemini_lyria plays music without end: give --seconds N\n"
    )
