"""`polystream convert` (with its loss report) and `polystream call` (against the
emulator), through ``main(argv)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polystream import decode
from polystream.cli import main
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread
from tests.helpers import FIXTURES

SIGNED = FIXTURES / "anthropic_messages"


def _a_fixture_with(text: str) -> Path:
    for path in sorted(SIGNED.glob("*.sse")):
        if text in path.read_text():
            return path
    raise AssertionError(f"no anthropic fixture contains {text!r}")


def test_convert_writes_the_target_and_a_loss_report(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    source = _a_fixture_with("signature_delta")
    report = tmp_path / "losses.json"
    assert (
        main(["convert", "--to", "openai_responses", "--loss-report", str(report), str(source)])
        == 0
    )
    out = capsysbinary.readouterr().out
    original = decode(source.read_bytes(), "anthropic_messages")
    converted = decode(out, "openai_responses")
    assert converted.text == original.text
    assert converted.status == original.status
    loss = json.loads(report.read_text())
    assert loss["source"] == "anthropic_messages" and loss["target"] == "openai_responses"
    assert any("signature" in entry["what"] for entry in loss["losses"])
    for entry in loss["losses"]:
        assert set(entry) >= {"what", "event_index", "event_type", "reason"}


def test_convert_to_the_json_array_framing(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    source = sorted((FIXTURES / "openai_chat").glob("*.sse"))[0]
    assert main(["convert", "--to", "gemini_generate", "--framing", "json_array", str(source)]) == 0
    out = capsysbinary.readouterr().out
    assert out.lstrip().startswith(b"[") and out.rstrip().endswith(b"]")
    assert decode(out).text == decode(source.read_bytes()).text


def test_convert_usage_and_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", "--to", "nope", "x"]) == 2
    bad = tmp_path / "bad.sse"
    bad.write_bytes(b"this is not a stream\n\n")
    assert main(["convert", "--to", "openai_chat", str(bad)]) == 1
    assert "could not detect" in capsys.readouterr().err


def test_call_against_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    reply = {
        "reasoning": "Hmm.",
        "text": ["Hello ", "there."],
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    with ServerThread(Emulator(parse_scenarios([{"reply": reply}]))) as server:
        status = main(
            [
                "call",
                "anthropic",
                "--model",
                "claude-haiku-4-5",
                "--api-key",
                "k",
                "--base-url",
                server.base_url + "/anthropic",
                "say hi",
            ]
        )
        out = capsys.readouterr()
        assert status == 0
        assert "Hello there." in out.out
        assert "completed" in out.err and "out 7" in out.err
        status = main(
            [
                "call",
                "openai",
                "--model",
                "gpt-5.4-nano",
                "--api-key",
                "k",
                "--base-url",
                server.base_url + "/openai/v1",
                "--json",
                "say hi",
            ]
        )
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert status == 0
        assert lines[0]["type"] == "stream-start" and lines[-1]["type"] == "finish"
        assert lines[-1]["status"] == "completed"


def test_call_reports_http_errors(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = {
        "reply": {"text": "x"},
        "faults": {"http_error": {"status": 401, "message": "bad key"}},
    }
    with ServerThread(Emulator(parse_scenarios([scenario]))) as server:
        status = main(
            [
                "call",
                "gemini",
                "--model",
                "gemini-3.5-flash-lite",
                "--api-key",
                "k",
                "--base-url",
                server.base_url + "/gemini",
                "hi",
            ]
        )
    assert status == 1
    assert "401" in capsys.readouterr().err
