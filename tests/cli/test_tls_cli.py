"""``--tls DIR`` of ``polystream serve`` and ``polystream gateway`` (and the gateway
config's ``tls``): the banner's https:// URL and ``SSL_CERT_FILE`` line, the TLS files
handed to either server, an authority that cannot be used (exit 2, the file named), and
``polystream serve --tls`` run for real, streamed from by the openai SDK."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
import uvicorn

import polystream.cli._heap as heap
import polystream.server._h1server as h1server
from polystream.cli import main
from polystream.server import prepare_tls


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What each server was asked to serve (neither serves: each records its call): the
    server, its port, and its TLS (the context's certificate, or uvicorn's files)."""
    calls: list[Any] = []
    monkeypatch.setattr(heap, "settle_heap", lambda: None)

    def run(app: Any, *, sock: socket.socket, ssl: ssl.SSLContext | None, **_: Any) -> None:
        calls.append(("polystream", sock.getsockname()[1], ssl))

    def serve(self: uvicorn.Server, sockets: list[socket.socket]) -> None:
        files = (self.config.ssl_certfile, self.config.ssl_keyfile)
        calls.append(("uvicorn", sockets[0].getsockname()[1], files))

    monkeypatch.setattr(h1server, "run", run)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    return calls


def check_tls(call: tuple[str, int, Any], directory: Path) -> None:
    """The server was given the certificate of ``directory``."""
    name, _, tls = call
    files = prepare_tls(directory)
    if name == "uvicorn":
        assert tls == (files.cert_file, files.key_file)
    else:
        assert isinstance(tls, ssl.SSLContext)
        assert tls.get_ca_certs() == []  # (a server context: it trusts no one's)


@pytest.mark.parametrize("server", ["uvicorn", "polystream"])
def test_serve_with_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: list[Any], server: str
) -> None:
    directory = tmp_path / "certs"
    assert main(["serve", "--port", "0", "--tls", str(directory), "--server", server]) == 0
    [call] = served
    check_tls(call, directory)
    root = f"https://127.0.0.1:{call[1]}"
    assert capsys.readouterr().err.splitlines() == [
        f"polystream emulator on {root}: 0 scenario(s), 0 capture(s)",
        f"  OpenAI     base_url={root}/openai/v1",
        f"  xAI        base_url={root}/xai/v1 (OpenAI SDK), {root}/xai (Anthropic SDK)",
        f"  Anthropic  base_url={root}/anthropic",
        f"  Gemini     http_options={{'base_url': '{root}/gemini'}}",
        f"  TLS        clients trust its certificate with SSL_CERT_FILE={directory / 'ca.pem'}",
    ]


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_gateway_with_tls(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    served: list[Any],
    server: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    directory = tmp_path / "certs"
    argv = ["gateway", "--upstream", "openai", "--listen", "127.0.0.1:0", "--server", server]
    assert main([*argv, "--tls", str(directory)]) == 0
    [call] = served
    check_tls(call, directory)
    assert capsys.readouterr().err.splitlines() == [
        f"polystream gateway on https://127.0.0.1:{call[1]} -> openai (openai_responses)",
        f"  TLS        clients trust its certificate with SSL_CERT_FILE={directory / 'ca.pem'}",
    ]


def test_the_gateway_configs_tls_is_relative_to_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    served: list[Any],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "gateway.json"
    upstreams = {"openai": {"dialect": "openai_responses"}}
    config.write_text(json.dumps({"upstreams": upstreams, "tls": "certs"}))
    monkeypatch.chdir(tmp_path)
    assert main(["gateway", "--config", str(config), "--listen", "127.0.0.1:0"]) == 0
    [call] = served
    check_tls(call, tmp_path / "conf" / "certs")
    assert f"SSL_CERT_FILE={tmp_path / 'conf' / 'certs' / 'ca.pem'}" in capsys.readouterr().err
    # --tls is preferred to the config's.
    argv = ["gateway", "--config", str(config), "--listen", "127.0.0.1:0", "--tls", "other"]
    assert main(argv) == 0
    check_tls(served[1], tmp_path / "other")


@pytest.mark.parametrize("command", ["serve", "gateway"])
def test_an_authority_that_cannot_be_used_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: list[Any], command: str
) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    (tmp_path / "ca-key.pem").write_text("not a key")
    argv = ["serve", "--port", "0"] if command == "serve" else ["gateway", "--upstream", "openai"]
    assert main([*argv, "--tls", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (
        f"polystream: error: --tls: {tmp_path / 'ca.pem'}: not a PEM certificate"
    )
    assert served == []
    assert (tmp_path / "ca.pem").read_text() == "not a certificate"


def test_a_host_the_certificate_is_not_for_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: list[Any]
) -> None:
    # (Bound on loopback: the warning is about the name clients use, not the address.)
    argv = ["gateway", "--upstream", "openai=http://127.0.0.1:9/v1"]
    assert main([*argv, "--listen", "127.0.0.2:0", "--tls", str(tmp_path)]) == 0
    assert capsys.readouterr().err.splitlines()[0] == (
        "polystream gateway: warning: the TLS certificate is for localhost, 127.0.0.1 and "
        "::1 only; clients that reach 127.0.0.2 by that name will not trust it"
    )


@pytest.mark.parametrize("server", ["uvicorn", "polystream"])
def test_serve_tls_for_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str) -> None:
    directory = tmp_path / "certs"
    argv = ["serve", "--port", "0", "--tls", str(directory), "--server", server]
    process = subprocess.Popen(
        [sys.executable, "-m", "polystream", *argv, "--log-level", "warning"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = [process.stderr.readline() for _ in range(6)]
        assert banner[-1] == (
            f"  TLS        clients trust its certificate with SSL_CERT_FILE={directory}/ca.pem\n"
        )
        base_url = banner[1].split("base_url=")[1].strip()
        assert base_url.startswith("https://127.0.0.1:")
        monkeypatch.setenv("SSL_CERT_FILE", str(directory / "ca.pem"))
        with openai.OpenAI(base_url=base_url, api_key="x", max_retries=2) as client:
            chunks = list(
                client.chat.completions.create(
                    model="gpt-5.4-nano",
                    messages=[{"role": "user", "content": "Hello there"}],
                    stream=True,
                )
            )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Emulated reply from gpt-5.4-nano. You said: Hello there"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert "Traceback" not in err
