"""Helpers shared by the emulator and server tests."""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_
import threading
import time
from typing import Any, TypeVar

import uvicorn

from polystream.gateway_core import Limits
from polystream.server._h1server import H1Server, ServerLimits
from polystream.server._run import uvicorn_limit_concurrency

_Client = TypeVar("_Client")
_OPEN: list[Any] = []

WEATHER = {
    "match": {"contains": "weather"},
    "reply": {
        "reasoning": {
            "text": "The user wants the weather. Call the tool.",
            "signature": "c2lnLTE=",
        },
        "text": "Let me check.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_w1"}],
    },
}
"""A reply with reasoning (and its signature: base64, as Gemini's SDK requires), text
and a tool call."""


def require(*dialects: str) -> None:
    """Every dialect the test needs is present and complete (a failure, never a skip)."""
    from polystream.dialects import get_dialect

    for name in dialects:
        module = get_dialect(name).module()
        assert all(hasattr(module, attr) for attr in ("Decoder", "Encoder", "rebuild")), name


def track(client: _Client) -> _Client:
    """Register an SDK client to be closed after the test (see conftest), so that no
    socket is left for the garbage collector to warn about during a later test."""
    _OPEN.append(client)
    return client


def close_tracked() -> None:
    """Close every SDK client registered by :func:`track`."""
    while _OPEN:
        _OPEN.pop().close()


class OwnServer:
    """polystream's server for ``app`` on a loop in a thread (``refusal``: the shape of
    its early refusals; ``ssl``: a server-side TLS context; ``limits``:
    :class:`ServerLimits` fields)."""

    kind = "polystream"

    def __init__(
        self, app: Any, refusal: Any = None, ssl: ssl_.SSLContext | None = None, **limits: Any
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = H1Server(app, limits=ServerLimits(**limits), refusal=refusal)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        start = self.server.start("127.0.0.1", 0, ssl=ssl)
        asyncio.run_coroutine_threadsafe(start, self.loop).result(5)
        self.port = self.server.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class UvicornServer:
    """uvicorn serving ``app`` as ``--server uvicorn`` runs it (its default protocol,
    httptools; ``limit_concurrency`` from ``max_connections``)."""

    kind = "uvicorn"

    def __init__(self, app: Any, max_connections: int = Limits().max_connections) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_level="critical",
            lifespan="off",
            access_log=False,
            limit_concurrency=uvicorn_limit_concurrency(max_connections),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.sock.close()


def talk(port: int, data: bytes, *, wait: float) -> tuple[bytes, bool]:
    """Send ``data``; (what came back, whether the server closed the connection) once
    it closes or ``wait`` seconds pass without a byte."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(wait)
        sock.sendall(data)
        out = b""
        try:
            while True:
                got = sock.recv(65536)
                if not got:
                    return out, True
                out += got
        except TimeoutError:
            return out, False
        except ConnectionResetError:
            return out, True
