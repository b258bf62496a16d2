"""The serving commands' start-up: a port in use is one clean message and exit code 2,
before any banner, under either server; an upstream without a key is a warning that
names its variable, and the gateway starts anyway."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

import polystream.cli._heap as heap
import polystream.server._h1server as h1server
from polystream.cli import main


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another server listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the servers were asked to serve on (neither serves: each records its call)."""
    calls: list[Any] = []
    monkeypatch.setattr(heap, "settle_heap", lambda: None)

    def run(app: Any, *, sock: socket.socket, **limits: Any) -> None:
        # The gateway hands its connection and body bounds, and the shape of its
        # refusals, to the server.
        assert set(limits) <= {"max_connections", "max_body_bytes", "refusal", "ssl"}
        calls.append(("polystream", sock.getsockname()))

    def serve(self: uvicorn.Server, sockets: list[socket.socket]) -> None:
        calls.append(("uvicorn", sockets[0].getsockname()))

    monkeypatch.setattr(h1server, "run", run)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    return calls


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_gateway_on_a_port_in_use_is_one_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], taken: int, served: list[Any], server: str
) -> None:
    argv = ["gateway", "--upstream", "openai", "--listen", f"127.0.0.1:{taken}"]
    assert main([*argv, "--server", server]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"polystream gateway: cannot listen on 127.0.0.1:{taken}: address already in use\n"
    )
    assert served == []


def test_serve_on_a_port_in_use_is_one_message_and_exit_2(
    capsys: pytest.CaptureFixture[str], taken: int, served: list[Any]
) -> None:
    assert main(["serve", "--port", str(taken)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"polystream serve: cannot listen on 127.0.0.1:{taken}: address already in use\n"
    assert served == []


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_gateway_warns_of_each_upstream_without_a_key_and_starts(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    served: list[Any],
    server: str,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-present")
    argv = ["gateway", "--listen", "127.0.0.1:0", "--server", server]
    for upstream in ("openai", "anthropic", "gemini=http://127.0.0.1:9/gemini"):
        argv += ["--upstream", upstream]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == ""
    [(name, (host, port))] = served
    assert name == server and host == "127.0.0.1" and port > 0
    assert err.splitlines() == [
        "polystream gateway: warning: upstream openai (openai_responses) has no key: "
        "OPENAI_API_KEY is not set, so its requests are sent without one",
        "polystream gateway: warning: upstream gemini (gemini_generate) has no key: "
        "GEMINI_API_KEY is not set, so its requests are sent without one",
        f"polystream gateway on http://127.0.0.1:{port} -> openai (openai_responses), "
        "anthropic (anthropic_messages), gemini (gemini_generate)",
    ]


def test_gateway_with_every_key_prints_only_its_banner(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, served: list[Any]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    assert main(["gateway", "--upstream", "openai", "--listen", "127.0.0.1:0"]) == 0
    [(_, (_, port))] = served
    assert capsys.readouterr().err == (
        f"polystream gateway on http://127.0.0.1:{port} -> openai (openai_responses)\n"
    )


@pytest.mark.parametrize("listen", ["127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_gateway_with_a_bad_listen_address_is_exit_2(
    capsys: pytest.CaptureFixture[str], served: list[Any], listen: str
) -> None:
    assert main(["gateway", "--upstream", "openai", "--listen", listen]) == 2
    assert capsys.readouterr().err == (
        f"polystream: error: --listen is HOST:PORT, not {listen!r}\n"
    )
    assert served == []
