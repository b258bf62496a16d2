"""``polystream demo`` and ``polystream serve``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from polystream.cli import main
from polystream.dialects import SSE_DIALECTS
from polystream.scenario import ScenarioError
from polystream.scenario._demo import DEMO_ANSWER, DEMO_ARGUMENTS, DEMO_REASONING, DEMO_TOOL
from tests.server.support import require


def test_demo_json_every_dialect_completes(capsys: pytest.CaptureFixture[str]) -> None:
    require(*SSE_DIALECTS)
    assert main(["demo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert [row["dialect"] for row in report["dialects"]] == list(SSE_DIALECTS)
    for row in report["dialects"]:
        assert row["status"] == "completed", row
        assert row["ok"] and row["problems"] == []
        assert row["text"] == DEMO_ANSWER
        assert row["tool_call"]["name"] == DEMO_TOOL
        assert row["tool_call"]["arguments"] == DEMO_ARGUMENTS
        assert tuple(row["reasoning"]) == DEMO_REASONING
        assert [r["unified"] for r in row["finish_reasons"]] == ["tool_calls", "stop"]
        assert row["events"] > 10 and row["bytes"] > 500
        assert 0 < row["ttfe_ms"] < row["elapsed_ms"]
        assert row["usage"]["total_tokens"] > 0


def test_demo_rich_output_without_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    require(*SSE_DIALECTS)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "8/8 dialects produced the expected result." in out
    for dialect in SSE_DIALECTS:
        assert dialect in out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_subprocess_with_scenarios(tmp_path: Path) -> None:
    require("openai_chat")
    scenarios = tmp_path / "s.json"
    scenarios.write_text(json.dumps({"reply": {"text": "from the file"}}))
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "polystream",
            "serve",
            "--port",
            str(port),
            "--scenarios",
            str(scenarios),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                reply = httpx.post(
                    f"http://127.0.0.1:{port}/openai/v1/chat/completions",
                    json={"model": "gpt-5", "messages": [{"role": "user", "content": "x"}]},
                )
                break
            except httpx.ConnectError:
                assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert reply.json()["choices"][0]["message"]["content"] == "from the file"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert b"Traceback" not in err
    assert f"base_url=http://127.0.0.1:{port}/openai/v1".encode() in err


def test_serve_rejects_bad_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"faults": {"nope": 1}}')
    assert main(["serve", "--scenarios", str(bad)]) == 1
    assert "nope" in capsys.readouterr().err


def test_load_emulator_yaml_and_relative_capture(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    require("anthropic_messages", "openai_chat")
    from polystream.scenario import Emulator, parse_scenarios
    from polystream.server import ServerThread, load_emulator

    # Record a capture in one dialect...
    with ServerThread(Emulator(parse_scenarios({"reply": {"text": "recorded words"}}))) as source:
        capture = httpx.post(
            source.base_url + "/anthropic/v1/messages",
            json={
                "model": "claude-sonnet-5-5",
                "max_tokens": 9,
                "stream": True,
                "messages": [{"role": "user", "content": "x"}],
            },
        ).content
    (tmp_path / "captures").mkdir()
    (tmp_path / "captures" / "a.sse").write_bytes(capture)
    scenarios = tmp_path / "s.yaml"
    scenarios.write_text(
        "- match: {contains: replay}\n  reply: {replay: captures/a.sse}\n"
        "- match: {contains: plain}\n  reply: {text: from yaml}\n"
    )
    # ...and serve it, from a YAML scenario file, in another dialect.
    with ServerThread(load_emulator([str(scenarios)])) as server:
        url = server.base_url + "/openai/v1/chat/completions"
        replayed = httpx.post(
            url, json={"model": "gpt-5", "messages": [{"role": "user", "content": "replay it"}]}
        ).json()
        plain = httpx.post(
            url, json={"model": "gpt-5", "messages": [{"role": "user", "content": "plain"}]}
        ).json()
    assert replayed["choices"][0]["message"]["content"] == "recorded words"
    assert replayed["model"] == "gpt-5"
    assert plain["choices"][0]["message"]["content"] == "from yaml"
    missing = tmp_path / "m.json"
    missing.write_text('{"reply": {"replay": "nowhere.sse"}}')
    with pytest.raises(ScenarioError, match="not found"):
        load_emulator([str(missing)])


def test_demo_in_a_plain_ascii_terminal() -> None:
    require(*SSE_DIALECTS)
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-m", "polystream", "demo"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"8/8 dialects produced the expected result." in done.stdout
    assert b"Traceback" not in done.stderr
