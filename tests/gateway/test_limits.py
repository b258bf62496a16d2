"""Gateway limits: keep-alive comments on long silences, the concurrency limit, slow
readers, the config file and the command line."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from polystream import decode
from polystream.gateway_core import load_config
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread
from polystream.wire.sse import SSEComment, SSEDecoder

from .conftest import GATEWAY_KEY

HEADERS = {"x-api-key": GATEWAY_KEY}
BODY = {
    "model": "claude-x",
    "max_tokens": 50,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


def test_keepalive_comment_on_long_upstream_silence(stack: Callable[..., Any]) -> None:
    _, gateway = stack(
        "openai_chat",
        [{"reply": {"text": ["a", "b"]}, "timing": {"delay": 0.6}}],
        keepalive_seconds=0.2,
    )
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY, timeout=30
    )
    comments = [f for f in SSEDecoder().feed(response.content) if isinstance(f, SSEComment)]
    assert any(c.text == "keep-alive" for c in comments)


def test_no_keepalive_comment_while_events_flow(stack: Callable[..., Any]) -> None:
    # Events every 0.1 s for 2 s, keep-alives after 0.5 s of silence: there is none.
    _, gateway = stack(
        "openai_chat",
        [{"reply": {"text": ["a"] * 20}, "timing": {"delay": 0.1}}],
        keepalive_seconds=0.5,
    )
    response = httpx.post(
        gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY, timeout=30
    )
    frames = SSEDecoder().feed(response.content)
    assert not [f for f in frames if isinstance(f, SSEComment)]
    assert sum(1 for f in frames if not isinstance(f, SSEComment)) > 20  # the stream came


def test_concurrency_limit_is_503_with_retry_after(stack: Callable[..., Any]) -> None:
    _, gateway = stack(
        "openai_chat",
        [{"reply": {"text": ["a"] * 20}, "timing": {"delay": 0.1}}],
        max_concurrency=1,
    )
    started = threading.Event()

    def long_stream() -> None:
        with httpx.stream(
            "POST",
            gateway.base_url + "/anthropic/v1/messages",
            headers=HEADERS,
            json=BODY,
            timeout=30,
        ) as response:
            for _ in response.iter_bytes():
                started.set()

    worker = threading.Thread(target=long_stream)
    worker.start()
    assert started.wait(10)
    busy = httpx.post(gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY)
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"]["type"] == "overloaded_error"
    worker.join(30)
    # Once the first stream is done, the gateway serves again.
    assert (
        httpx.post(
            gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY, timeout=30
        ).status_code
        == 200
    )


def test_many_concurrent_streams(stack: Callable[..., Any]) -> None:
    _, gateway = stack("gemini_generate", [{"reply": {"text": ["x", "y"]}}])
    results: list[int] = []

    def one() -> None:
        response = httpx.post(
            gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY, timeout=60
        )
        results.append(response.status_code if b"message_stop" in response.content else 0)

    threads = [threading.Thread(target=one) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [200] * 40


def test_config_file_and_command_line(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(
        '{"upstreams": {"u": {"dialect": "openai_chat", '
        '"base_url": "http://127.0.0.1:9/v1", "api_key": "k"}}, '
        '"routes": [{"model": "*", "upstream": "u", "rewrite": "gpt-5.4-nano"}]}'
    )
    loaded = load_config(config.read_bytes())
    assert loaded.route("anything")[1] == "gpt-5.4-nano"  # type: ignore[index]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "polystream",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--config",
            str(config),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        # (the port it listens on: the one --listen 127.0.0.1:0 bound)
        assert re.fullmatch(
            r"polystream gateway on http://127\.0\.0\.1:[1-9]\d* -> u \(openai_chat\)\n", line
        )
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stderr.close()  # type: ignore[union-attr]


def test_command_line_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from polystream.cli import main

    assert main(["gateway"]) == 2
    assert "--upstream" in capsys.readouterr().err
    assert main(["gateway", "--upstream", "nope"]) == 2
    assert main(["gateway", "--upstream", "openai", "--max-concurrency", "0"]) == 2
    assert "max_concurrency must be at least 1" in capsys.readouterr().err
    assert main(["gateway", "--upstream", "openai", "--resume-grace", "-1"]) == 2
    assert "resume_grace_seconds" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ('{"keepalive_seconds": 0}', "keepalive_seconds"),  # keep-alives in a loop
        ('{"slow_client_seconds": -1}', "slow_client_seconds"),  # every client dropped
        ('{"idle_timeout": 0}', "idle_timeout"),
        ('{"max_body_bytes": 0}', "max_body_bytes"),  # every request refused
        ('{"resume_grace_seconds": -0.5}', "resume_grace_seconds"),
    ],
)
def test_config_limits_out_of_range_are_refused(limits: str, message: str) -> None:
    import msgspec

    data = b'{"upstreams": {"u": {"dialect": "openai_chat"}}, "limits": ' + limits.encode() + b"}"
    with pytest.raises(msgspec.ValidationError, match=message):
        load_config(data)


def test_slow_reader_is_disconnected(stack: Callable[..., Any]) -> None:
    big = "z" * 50_000
    emulator, gateway = stack(
        "openai_chat", [{"reply": {"text": [big] * 400}}], slow_client_seconds=0.5
    )
    with httpx.stream(
        "POST", gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=BODY, timeout=30
    ) as response:
        stream = response.iter_raw(1024)
        next(stream)
        time.sleep(3)  # stop reading: the gateway's send buffer fills, then it gives up
        received = 0
        with pytest.raises(httpx.HTTPError):
            for chunk in stream:
                received += len(chunk)
    assert received < 400 * 50_000
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not emulator.stats.cancelled:
        time.sleep(0.05)
    assert emulator.stats.cancelled == 1


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_the_command_serves_and_stops_cleanly(tmp_path: Path, server: str) -> None:
    """``polystream gateway`` with either HTTP server: a streamed request through it,
    then SIGTERM ends it gracefully."""
    with ServerThread(Emulator(parse_scenarios([{"reply": {"text": ["via ", "cli"]}}]))) as up:
        config = tmp_path / "gateway.json"
        config.write_text(
            '{"upstreams": {"u": {"dialect": "openai_chat", '
            f'"base_url": "{up.base_url}/openai/v1", "api_key": "k"}}}}, '
            '"routes": [{"model": "*", "upstream": "u", "rewrite": "gpt-5.4-nano"}]}'
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        argv = ["gateway", "--listen", f"127.0.0.1:{port}", "--config", str(config)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "polystream", *argv, "--server", server],
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.05)
            response = httpx.post(
                f"http://127.0.0.1:{port}/anthropic/v1/messages",
                json=BODY,
                timeout=30,
            )
            assert response.status_code == 200
            assert decode(response.content, "anthropic_messages").text == "via cli"
            proc.send_signal(signal.SIGTERM)
            # uvicorn shuts down, then raises the signal again (a signal's exit status).
            assert proc.wait(15) == (0 if server == "polystream" else -signal.SIGTERM)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()  # type: ignore[union-attr]
