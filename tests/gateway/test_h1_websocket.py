"""polystream's HTTP/1.1 server serving the ASGI ``websocket`` scope (what the gateway's
WebSocket relay runs on), with the ``websockets`` client and raw sockets: the scope, the
messages both ways (text, bytes, fragments, the size bound, invalid UTF-8), pings, the
closing handshake both ways, the refusals (403, the ``websocket.http.response``
extension, a failed app), and the upgrade's place among HTTP requests. The behaviours
ASGI defines are checked under uvicorn too: they are the same."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from polystream.server._h1websocket import MAX_MESSAGE_BYTES
from tests.gateway.conftest import AppThread

Scope = dict[str, Any]
SERVERS = ["polystream", "uvicorn"]


class Seen:
    """What the app saw: its scope and every message it received."""

    def __init__(self) -> None:
        self.scope: Scope = {}
        self.messages: list[dict[str, Any]] = []
        self.done = threading.Event()


def echo_app(seen: Seen, *, subprotocol: str | None = None) -> Callable[..., Any]:
    """Accepts, echoes each message, and says ``bye`` with a close of 4000 when told
    ``"close"``; an HTTP request is answered ``plain``."""

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await receive()
            body = b"plain " + scope["path"].encode()
            headers = [(b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "websocket":
            return
        seen.scope = dict(scope)
        try:
            seen.messages.append(await receive())
            accept: dict[str, Any] = {"type": "websocket.accept", "headers": [(b"x-seen", b"1")]}
            if subprotocol is not None:
                accept["subprotocol"] = subprotocol
            await send(accept)
            while True:
                message = await receive()
                seen.messages.append(message)
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") == "close":
                    await send({"type": "websocket.close", "code": 4000, "reason": "bye"})
                    seen.messages.append(await receive())
                    return
                if message.get("text") == "return":
                    return
                if message.get("text") == "fail":
                    raise RuntimeError("the app failed")
                out = {"type": "websocket.send"}
                if message.get("text") is not None:
                    out["text"] = message["text"]
                else:
                    out["bytes"] = message["bytes"]
                await send(out)
        finally:
            seen.done.set()

    return app


@contextmanager
def serving(app: Callable[..., Any], server: str = "polystream") -> Iterator[AppThread]:
    front = AppThread(app, server=server).start()
    try:
        yield front
    finally:
        front.stop()


def url(front: AppThread, path: str = "/socket?x=1") -> str:
    return front.base_url.replace("http://", "ws://") + path


def handshake(port: int, path: str = "/socket", extra: bytes = b"") -> tuple[socket.socket, bytes]:
    """A raw socket after a WebSocket handshake (``extra`` sent with it); the response
    head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(b"0123456789abcdef")
    sock.sendall(
        b"GET %b HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: %b\r\nSec-WebSocket-Version: 13\r\n\r\n%b"
        % (path.encode(), key, extra)
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    return sock, head


def frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """A client frame, masked with a zero key (the payload as it is)."""
    assert len(payload) < 126
    return bytes([(0x80 if fin else 0) | opcode, 0x80 | len(payload)]) + b"\0\0\0\0" + payload


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """A server frame (unmasked, short): its opcode and payload."""
    first, second = sock.recv(1)[0], sock.recv(1)[0]
    size = second & 0x7F
    assert size < 126
    payload = b""
    while len(payload) < size:
        payload += sock.recv(size - len(payload))
    return first & 0x0F, payload


@pytest.mark.parametrize("server", SERVERS)
def test_echo_and_the_scope(server: str) -> None:
    seen = Seen()
    with (
        serving(echo_app(seen, subprotocol="chat"), server) as front,
        connect(url(front), subprotocols=["chat", "other"], compression=None) as ws,  # type: ignore[list-item]
    ):
        assert ws.subprotocol == "chat"
        assert ws.response is not None and ws.response.headers["x-seen"] == "1"
        ws.send("caf\u00e9 \U0001f600")
        assert ws.recv() == "caf\u00e9 \U0001f600"
        ws.send(b"\x00\xff" * 40_000)
        assert ws.recv() == b"\x00\xff" * 40_000
        ws.send(["one ", "two ", "three"])  # (one message in three fragments)
        assert ws.recv() == "one two three"
        ws.ping(b"p").wait(5)
        ws.close(4100, "done")
    assert seen.done.wait(5)
    scope = seen.scope
    assert (scope["type"], scope["path"], scope["query_string"], scope["scheme"]) == (
        "websocket",
        "/socket",
        b"x=1",
        "ws",
    )
    assert scope["subprotocols"] == ["chat", "other"]
    assert scope["asgi"]["spec_version"] in ("2.3", "2.4")
    assert "websocket.http.response" in scope["extensions"]
    assert (b"sec-websocket-protocol", b"chat, other") in scope["headers"]
    assert seen.messages == [
        {"type": "websocket.connect"},
        {"type": "websocket.receive", "text": "caf\u00e9 \U0001f600"},
        {"type": "websocket.receive", "bytes": b"\x00\xff" * 40_000},
        {"type": "websocket.receive", "text": "one two three"},
        {"type": "websocket.disconnect", "code": 4100, "reason": "done"},
    ]


@pytest.mark.parametrize("server", SERVERS)
def test_the_app_closes(server: str) -> None:
    seen = Seen()
    with serving(echo_app(seen), server) as front, connect(url(front)) as ws:
        ws.send("close")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4000, "bye")
    assert seen.done.wait(5)
    assert seen.messages[-1]["type"] == "websocket.disconnect"


def test_an_app_that_returns_or_fails_after_accepting() -> None:
    seen = Seen()
    with serving(echo_app(seen)) as front:
        for text, code in (("return", 1000), ("fail", 1011)):
            with connect(url(front)) as ws:
                ws.send(text)
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == code


@pytest.mark.parametrize("server", SERVERS)
def test_refusals_before_accepting(server: str) -> None:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        await receive()
        if scope["path"] == "/close":
            await send({"type": "websocket.close", "code": 1008})
        elif scope["path"] == "/deny":
            body = b'{"error": "no"}'
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"x-why", b"key")],
                }
            )
            await send(
                {"type": "websocket.http.response.body", "body": body[:5], "more_body": True}
            )
            await send({"type": "websocket.http.response.body", "body": body[5:]})
        else:
            raise RuntimeError("the app failed")

    with serving(app, server) as front:
        statuses = {}
        for path in ("/close", "/deny", "/fail"):
            with pytest.raises(InvalidStatus) as refused:
                connect(url(front, path)).close()
            statuses[path] = refused.value.response
    assert statuses["/close"].status_code == 403
    denied = statuses["/deny"]
    assert (denied.status_code, denied.body) == (401, b'{"error": "no"}')
    assert denied.headers["content-type"] == "application/json"
    assert denied.headers["x-why"] == "key"
    assert statuses["/fail"].status_code == 500


def test_a_malformed_handshake_is_refused_by_the_library() -> None:
    seen = Seen()
    with serving(echo_app(seen)) as front:
        sock = socket.create_connection(("127.0.0.1", front.port), timeout=5)
        sock.sendall(
            b"GET /socket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        sock.close()
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Sec-WebSocket-Key" in answer
    assert seen.scope == {}


def test_frames_sent_with_the_handshake_and_invalid_utf8() -> None:
    seen = Seen()
    with serving(echo_app(seen)) as front:
        sock, head = handshake(front.port, extra=frame(0x1, b"early"))
        assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        assert read_frame(sock) == (0x1, b"early")
        sock.sendall(frame(0x1, b"fragm", fin=False) + frame(0x0, b"ented"))
        assert read_frame(sock) == (0x1, b"fragmented")
        sock.sendall(frame(0x9, b"ping!"))
        assert read_frame(sock) == (0xA, b"ping!")
        sock.sendall(frame(0x1, b"\xff\xfe"))
        opcode, payload = read_frame(sock)
        sock.close()
    assert opcode == 0x8
    assert int.from_bytes(payload[:2], "big") == 1007
    assert seen.done.wait(5)
    assert seen.messages[-1] == {
        "type": "websocket.disconnect",
        "code": 1007,
        "reason": "invalid UTF-8 in a text message",
    }


def test_a_message_over_the_bound_closes_with_1009() -> None:
    seen = Seen()
    with (
        serving(echo_app(seen)) as front,
        contextlib.suppress(ConnectionClosed),  # (its close, on leaving, finds it closed)
        connect(url(front), max_size=None) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        ws.send(b"\0" * (MAX_MESSAGE_BYTES + 1))  # (it may close while this is sent)
        ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009
    assert seen.done.wait(5)
    assert seen.messages[-1]["code"] == 1009


def test_an_upgrade_after_a_plain_request_on_one_connection() -> None:
    seen = Seen()
    with serving(echo_app(seen)) as front:
        sock = socket.create_connection(("127.0.0.1", front.port), timeout=5)
        sock.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"plain /first"):
            answer += sock.recv(4096)
        key = base64.b64encode(b"0123456789abcdef")
        sock.sendall(
            b"GET /socket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %b\r\nSec-WebSocket-Version: 13\r\n\r\n" % key + frame(0x2, b"hi")
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101 ")
        assert read_frame(sock) == (0x2, b"hi")
        sock.close()


def test_a_client_gone_without_a_close_and_a_send_after_it() -> None:
    sent_after: list[BaseException] = []
    gone = threading.Event()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        await receive()
        await send({"type": "websocket.accept"})
        message = await receive()
        assert message == {"type": "websocket.disconnect", "code": 1006, "reason": ""}
        try:
            await send({"type": "websocket.send", "text": "late"})
        except OSError as exc:
            sent_after.append(exc)
        gone.set()

    with serving(app) as front:
        sock, head = handshake(front.port)
        assert head.startswith(b"HTTP/1.1 101 ")
        sock.close()
        assert gone.wait(5)
    assert len(sent_after) == 1


def test_shutdown_closes_open_sockets_with_1012() -> None:
    seen = Seen()
    front = AppThread(echo_app(seen)).start()
    try:
        with connect(url(front)) as ws:
            ws.send("x")
            assert ws.recv() == "x"
            threading.Thread(target=front.stop).start()
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
    finally:
        front.stop()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1012
    assert seen.done.wait(5)
    assert seen.messages[-1] == {
        "type": "websocket.disconnect",
        "code": 1012,
        "reason": "server shutting down",
    }


def test_an_app_not_reading_pauses_the_socket() -> None:
    release = asyncio.Event()
    loop: list[asyncio.AbstractEventLoop] = []
    taken: list[int] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        loop.append(asyncio.get_running_loop())
        await receive()
        await send({"type": "websocket.accept"})
        await release.wait()
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                break
            taken.append(len(message["bytes"]))
            if len(taken) == 400:
                await send({"type": "websocket.send", "text": json.dumps(len(taken))})

    chunk = b"\x05" * 65536
    with serving(app) as front, connect(url(front), compression=None) as ws:
        done = threading.Event()

        def flood() -> None:
            for _ in range(400):
                ws.send(chunk)
            done.set()

        threading.Thread(target=flood, daemon=True).start()
        assert not done.wait(1.0)  # (the server stopped reading: the sends wait)
        loop[0].call_soon_threadsafe(release.set)
        assert done.wait(10)
        assert ws.recv() == "400"
    assert taken == [65536] * 400


def test_a_close_while_the_app_leaves_messages_unread() -> None:
    closing = threading.Event()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        await receive()
        await send({"type": "websocket.accept"})
        while not closing.is_set():  # (the messages pile up, unread: reading pauses)
            await asyncio.sleep(0.01)
        await send({"type": "websocket.close", "code": 4003, "reason": "no more"})

    with serving(app) as front, connect(url(front), compression=None) as ws:
        done = threading.Event()

        def flood() -> None:
            with contextlib.suppress(ConnectionClosed):
                for _ in range(400):
                    ws.send(b"\x05" * 65536)
            done.set()

        threading.Thread(target=flood, daemon=True).start()
        time.sleep(0.3)
        closing.set()
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
        assert done.wait(5)
    # (Past its close, the server reads again and drops what comes: the close completes.)
    assert time.monotonic() - started < 2.0
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4003, "no more")


def test_frames_sent_while_the_app_has_not_answered() -> None:
    seen = Seen()
    echo = echo_app(seen)

    async def slow(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await asyncio.sleep(0.2)  # (an upstream asked before the handshake's answer)
        await echo(scope, receive, send)

    with serving(slow) as front:
        sock = socket.create_connection(("127.0.0.1", front.port), timeout=5)
        key = base64.b64encode(b"0123456789abcdef")
        sock.sendall(
            b"GET /socket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: %b\r\nSec-WebSocket-Version: 13\r\n\r\n" % key
        )
        time.sleep(0.05)
        sock.sendall(frame(0x1, b"later"))
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        assert read_frame(sock) == (0x1, b"later")
        sock.close()
