"""AsyncH1Transport: the emulator over it, and small servers that send exact bytes
(body framings, truncations, malformed replies, closed and timed-out connections, TLS,
proxies)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gzip
import ipaddress
import itertools
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import polystream
from polystream.client import AsyncClient, _h1
from polystream.client._h1 import AsyncH1Transport
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread

from .conftest import FAST, base_urls

Reply = list[bytes] | bytes
Handler = Callable[["_Exchange"], Awaitable[None]]


class _Exchange:
    """One request on one server connection: what was asked, and a way to answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int):
        self.reader = reader
        self.writer = writer
        self.connection = n
        self.head = b""
        self.body = b""

    async def receive(self) -> bool:
        """Read a request; False when the client closed the connection."""
        try:
            self.head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        lowered = self.head.lower()
        if b"transfer-encoding: chunked" in lowered:
            body = bytearray()
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
            self.body = bytes(body)
        elif b"content-length:" in lowered:
            length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
            self.body = await self.reader.readexactly(length)
        return True

    async def send(self, reply: Reply, pause: float = 0.0) -> None:
        """Write the reply's parts, each in its own segment when ``pause`` is set."""
        for part in [reply] if isinstance(reply, bytes) else reply:
            self.writer.write(part)
            await self.writer.drain()
            if pause:
                await asyncio.sleep(pause)

    def close(self) -> None:
        self.writer.close()


class _Server:
    """A loopback server running ``handler`` for every request on every connection."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.requests: list[_Exchange] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> _Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = self.connections
        # A client that goes away mid-exchange ends this connection, as for any server.
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while not writer.is_closing():
                exchange = _Exchange(reader, writer, n)
                if not await exchange.receive():
                    break
                self.requests.append(exchange)
                await self.handler(exchange)
        writer.close()


def _answer(reply: Reply, pause: float = 0.0, close: bool = False) -> Handler:
    async def handler(exchange: _Exchange) -> None:
        await exchange.send(reply, pause)
        if close:
            exchange.close()

    return handler


def _run(
    handler: Handler, scenario: Callable[[_Server, httpx.AsyncClient], Awaitable[Any]], **kw: Any
) -> Any:
    async def main() -> Any:
        async with _Server(handler) as server:
            transport = AsyncH1Transport(**kw)
            async with httpx.AsyncClient(transport=transport, timeout=5) as client:
                return await scenario(server, client)

    return asyncio.run(main())


async def _get(server: _Server, client: httpx.AsyncClient, path: str = "/x") -> httpx.Response:
    response = await client.get(server.url + path)
    return response


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


# -- against the emulator ------------------------------------------------------------------


def test_a_streamed_reply_from_the_emulator_over_one_kept_alive_connection() -> None:
    deltas = [f"w{i} " for i in range(300)]
    with ServerThread(Emulator(parse_scenarios([{"reply": {"text": deltas}}]))) as server:

        async def scenario() -> tuple[list[str], int]:
            transport = AsyncH1Transport()
            texts = []
            async with AsyncClient(
                api_key="k", base_url=base_urls(server), retry=FAST, transport=transport
            ) as client:
                for dialect in ("anthropic_messages", "openai_chat", "openai_responses"):
                    model = (
                        "claude-haiku-4-5" if dialect.startswith("anthropic") else "gpt-5.4-nano"
                    )
                    stream = client.stream(dialect, model=model, prompt="hi", max_tokens=50)
                    texts.append((await stream.result()).text)
                opened = transport._open
            return texts, opened

        texts, opened = asyncio.run(scenario())
    assert texts == ["".join(deltas)] * 3
    assert opened == 1


def test_raw_bytes_from_the_emulator_decode_the_same() -> None:
    deltas = [f"r{i} " for i in range(50)]
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with ServerThread(Emulator(parse_scenarios([{"reply": {"text": deltas}}]))) as server:

        async def scenario() -> list[bytes]:
            out = []
            async with httpx.AsyncClient(transport=AsyncH1Transport(), timeout=10) as client:
                for _ in range(2):
                    url = server.base_url + "/anthropic/v1/messages"
                    async with client.stream("POST", url, json=body) as response:
                        assert response.status_code == 200
                        out.append(b"".join([c async for c in response.aiter_raw()]))
            return out

        bodies = asyncio.run(scenario())
    for data in bodies:
        assert polystream.decode(data, "anthropic_messages").text == "".join(deltas)


# -- body framings -------------------------------------------------------------------------


def test_chunked_with_extensions_and_trailers_several_chunks_per_segment() -> None:
    reply = CHUNKED + (
        b'5;name=value\r\nhello\r\n1 ;a="q;x"\r\n,\r\n6\r\n world\r\n'
        b"0;last\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n"
    )

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, bytes, int]:
        first = await _get(server, client)
        second = await _get(server, client)
        return first.content, second.content, server.connections

    assert _run(_answer(reply), scenario) == (b"hello, world", b"hello, world", 1)


@pytest.mark.parametrize("split", ["byte", "pairs"])
def test_chunked_one_byte_per_segment(split: str) -> None:
    body = b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n"
    step = 1 if split == "byte" else 2
    parts = [CHUNKED] + [body[i : i + step] for i in range(0, len(body), step)]

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, int]:
        chunks = []
        async with client.stream("GET", server.url) as response:
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
        again = await _get(server, client)
        assert again.content == b"abc0123456789abcdef"
        return b"".join(chunks), server.connections

    assert _run(_answer(parts, pause=0.002), scenario) == (b"abc0123456789abcdef", 1)


def test_chunked_parser_gives_the_same_bytes_in_every_split() -> None:
    body = b"3;x=1\r\nabc\r\n1\r\nd\r\na\r\n0123456789\r\n0\r\nA: b\r\n\r\n"
    expected = b"abcd0123456789"
    for step in range(1, len(body)):
        parser = _chunked_reply()
        out = b"".join(parser.feed(body[i : i + step]) for i in range(0, len(body), step))
        assert out == expected, step
        assert parser.ended
    # Cut short anywhere: never ended.
    for cut in range(len(body) - 1):
        parser = _chunked_reply()
        parser.feed(body[:cut])
        assert not parser.ended, cut


def _chunked_reply() -> _h1._Reply:
    """A reply parser that has read a chunked reply's head."""
    reply = _h1._Reply()
    assert reply.feed(CHUNKED) == b"" and reply.head_done
    return reply


def test_content_length_body_split_and_reused() -> None:
    reply = [OK_HEAD + b"Content-Length: 11\r\n\r\nhello", b" ", b"world"]

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, bytes, int]:
        first = await _get(server, client)
        second = await _get(server, client)
        return first.content, second.content, server.connections

    assert _run(_answer(reply, pause=0.002), scenario) == (b"hello world", b"hello world", 1)


def test_close_delimited_body_ends_at_close() -> None:
    reply = OK_HEAD + b"\r\nall of it"

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, bytes, int]:
        first = await _get(server, client)
        second = await _get(server, client)
        return first.content, second.content, server.connections

    assert _run(_answer(reply, close=True), scenario) == (b"all of it", b"all of it", 2)


@pytest.mark.parametrize(
    ("status", "method", "head"),
    [
        (204, "GET", b"HTTP/1.1 204 No Content\r\n\r\n"),
        (304, "GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"),
        (200, "HEAD", OK_HEAD + b"Content-Length: 5\r\n\r\n"),
        (200, "GET", OK_HEAD + b"Content-Length: 0\r\n\r\n"),
    ],
)
def test_replies_without_a_body_keep_the_connection(status: int, method: str, head: bytes) -> None:
    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[int, bytes, int]:
        await client.request(method, server.url)
        response = await client.request(method, server.url)
        return response.status_code, response.content, server.connections

    assert _run(_answer(head), scenario) == (status, b"", 1)


def test_interim_replies_are_skipped_and_headers_kept_as_sent() -> None:
    reply = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 201 Made\r\nX-A: 1\r\nx-a: 2\r\nX-B:  two words \r\n"
        b"Content-Length: 2\r\n\r\nok"
    )

    async def scenario(server: _Server, client: httpx.AsyncClient) -> httpx.Response:
        return await _get(server, client)

    response = _run(_answer(reply), scenario)
    assert response.status_code == 201
    assert response.reason_phrase == "Made"
    assert response.http_version == "HTTP/1.1"
    assert response.headers.get_list("x-a") == ["1", "2"]
    assert response.headers["x-b"] == "two words"
    assert response.content == b"ok"


def test_content_encoding_is_left_to_httpx() -> None:
    data = gzip.compress(b"unzipped " * 100)
    reply = OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(data) + data

    async def scenario(server: _Server, client: httpx.AsyncClient) -> bytes:
        return (await _get(server, client)).content

    assert _run(_answer(reply), scenario) == b"unzipped " * 100


# -- truncated and malformed replies ---------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        CHUNKED + b"5\r\nhel",  # in a chunk
        CHUNKED + b"5\r\nhello\r\n",  # between chunks
        CHUNKED + b"5\r\nhello\r\n0\r\n",  # in the trailers
        CHUNKED + b"5\r\nhello\r",  # in a chunk's CRLF
        CHUNKED + b"5\r\nhello\r\n1",  # in a size line
        OK_HEAD + b"Content-Length: 10\r\n\r\nhello",
        OK_HEAD + b"Content-Length: 10\r\n",  # in the head
    ],
)
def test_a_truncated_reply_is_never_a_clean_end(reply: bytes) -> None:
    async def scenario(server: _Server, client: httpx.AsyncClient) -> int:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("GET", server.url) as response:
                await response.aread()
        assert isinstance(client._transport, AsyncH1Transport)
        return client._transport._open

    assert _run(_answer(reply, close=True), scenario) == 0


def test_no_reply_at_all_on_a_new_connection() -> None:
    async def scenario(server: _Server, client: httpx.AsyncClient) -> bytes:
        return (await _get(server, client)).content

    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        _run(_answer(b"", close=True), scenario)


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\nab\r\n",
        b"-1\r\nx\r\n",
        b"0x2\r\nab\r\n",
        b"+2\r\nab\r\n",
        b"2 2\r\nab\r\n",
        b"\r\n",
        b"12345678901234567\r\n",
        b"2\nab\r\n0\r\n\r\n",
        b"2\r\nabX\r\n0\r\n\r\n",
        b"1" * (16 * 1024 + 10),  # a size line that never ends
    ],
)
def test_bad_chunk_sizes(body: bytes) -> None:
    async def scenario(server: _Server, client: httpx.AsyncClient) -> int:
        with pytest.raises(httpx.RemoteProtocolError):
            await _get(server, client)
        assert isinstance(client._transport, AsyncH1Transport)
        return client._transport._open

    assert _run(_answer(CHUNKED + body), scenario) == 0


@pytest.mark.parametrize(
    "reply",
    [
        OK_HEAD + b"X-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n",
        OK_HEAD + b"X-Big: " + b"a" * (70 * 1024),  # never ends
        b"HTTP/2 200 OK\r\n\r\n",
        b"SPDY 200\r\n\r\n",
        OK_HEAD + b"bad header line\r\n\r\n",
        OK_HEAD + b"Content-Length: 1x\r\n\r\n",
        OK_HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        OK_HEAD + b"Transfer-Encoding: gzip\r\n\r\n",
        OK_HEAD + b"X-Fold: one\r\n  two\r\nContent-Length: 0\r\n\r\n",  # obs-fold
    ],
)
def test_malformed_or_oversized_heads(reply: bytes) -> None:
    async def closed(server: _Server, client: httpx.AsyncClient) -> tuple[int, int]:
        with pytest.raises(httpx.RemoteProtocolError):
            await _get(server, client)
        transport = client._transport
        assert isinstance(transport, AsyncH1Transport)
        return transport._open, transport._idle_count

    assert _run(_answer(reply), closed) == (0, 0)  # the connection is not left open


def test_a_head_just_under_the_limit_is_accepted() -> None:
    big = b"a" * (_h1.MAX_HEAD_BYTES - 200)
    reply = [OK_HEAD + b"X-Big: " + big[:30000], big[30000:] + b"\r\nContent-Length: 1\r\n\r\n!"]

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[int, bytes]:
        response = await _get(server, client)
        return len(response.headers["x-big"]), response.content

    assert _run(_answer(reply, pause=0.002), scenario) == (len(big), b"!")


@pytest.mark.parametrize("cut", [0, 1, 2, 3])
def test_a_head_of_the_largest_size_is_accepted_however_its_end_arrives(cut: int) -> None:
    # The head is MAX_HEAD_BYTES long; the first read brings `cut` bytes of its end
    # (CR, CRLF, CRLF CR), the second the rest. One byte more is refused.
    start = OK_HEAD + b"Content-Length: 1\r\nX-Big: "
    big = b"a" * (_h1.MAX_HEAD_BYTES - len(start))
    head = start + big
    reply = [head + b"\r\n\r\n"[:cut], b"\r\n\r\n"[cut:] + b"!"]

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[int, bytes]:
        response = await _get(server, client)
        return len(response.headers["x-big"]), response.content

    assert len(head) == _h1.MAX_HEAD_BYTES
    assert _run(_answer(reply, pause=0.002), scenario) == (len(big), b"!")

    longer = [head + b"a" + b"\r\n\r\n"[:cut], b"\r\n\r\n"[cut:] + b"!"]

    async def refused(server: _Server, client: httpx.AsyncClient) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="response head too long"):
            await _get(server, client)

    _run(_answer(longer, pause=0.002), refused)


# -- connections ----------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["server", "client"])
def test_connection_close_is_honoured(side: str) -> None:
    extra = b"Connection: close\r\n" if side == "server" else b""
    reply = OK_HEAD + extra + b"Content-Length: 2\r\n\r\nok"
    headers = {"connection": "close"} if side == "client" else {}

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, int]:
        for _ in range(2):
            response = await client.get(server.url, headers=headers)
        return response.content, server.connections

    assert _run(_answer(reply), scenario) == (b"ok", 2)


def test_a_connection_closed_by_the_server_while_idle_is_replaced() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"

    async def handler(exchange: _Exchange) -> None:
        await exchange.send(reply)
        await asyncio.sleep(0.01)
        exchange.close()  # without a word

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, int, int]:
        await _get(server, client)
        await asyncio.sleep(0.1)
        response = await client.post(server.url, content=b"body")
        return response.content, server.connections, len(server.requests)

    assert _run(handler, scenario) == (b"ok", 2, 2)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_pooled_connection_closed_at_the_next_request_is_retried_once(method: str) -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    seen: list[int] = []

    async def handler(exchange: _Exchange) -> None:
        seen.append(exchange.connection)
        if len(seen) == 2:
            exchange.close()  # the second request, on the first connection: no reply
            return
        await exchange.send(reply)

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, list[bytes]]:
        await client.request(method, server.url, content=b"x")
        response = await client.request(method, server.url, content=b"y")
        return response.content, [request.body for request in server.requests]

    assert _run(handler, scenario) == (b"ok", [b"x", b"y", b"y"])
    assert seen == [1, 1, 2]


def test_a_reused_connection_failing_twice_is_an_error() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    seen: list[int] = []

    async def handler(exchange: _Exchange) -> None:
        seen.append(exchange.connection)
        if len(seen) == 1:
            await exchange.send(reply)
        else:
            exchange.close()

    async def scenario(server: _Server, client: httpx.AsyncClient) -> bytes:
        await client.post(server.url, content=b"x")
        return (await client.post(server.url, content=b"y")).content

    with pytest.raises(httpx.RemoteProtocolError):
        _run(handler, scenario)
    assert seen == [1, 1, 2]


def test_closing_a_reply_before_its_end_closes_the_connection() -> None:
    reply = [CHUNKED + b"3\r\none\r\n", b"3\r\ntwo\r\n0\r\n\r\n"]

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, int]:
        async with client.stream("GET", server.url) as response:
            async for chunk in response.aiter_raw():
                first = chunk
                break
        again = await _get(server, client)
        assert again.content == b"onetwo"
        return first, server.connections

    assert _run(_answer(reply, pause=0.05), scenario) == (b"one", 2)


def test_extra_bytes_after_a_reply_drop_the_connection() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nokJUNK"

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[bytes, int]:
        await _get(server, client)
        response = await _get(server, client)
        return response.content, server.connections

    assert _run(_answer(reply), scenario) == (b"ok", 2)


def test_idle_connections_are_bounded() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"

    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[int, int]:
        await asyncio.gather(*[_get(server, client) for _ in range(5)])
        transport = client._transport
        assert isinstance(transport, AsyncH1Transport)
        return transport._idle_count, transport._open

    idle, opened = _run(_answer(reply, pause=0.02), scenario, max_keepalive_connections=2)
    assert idle == 2 and opened == 2


def test_read_timeouts() -> None:
    async def silent(exchange: _Exchange) -> None:
        await asyncio.sleep(1)

    async def scenario(server: _Server, client: httpx.AsyncClient) -> None:
        await client.get(server.url, timeout=httpx.Timeout(5, read=0.05))

    with pytest.raises(httpx.ReadTimeout):
        _run(silent, scenario)

    async def stalls(exchange: _Exchange) -> None:
        await exchange.send(CHUNKED + b"2\r\nab\r\n")
        await asyncio.sleep(1)

    async def in_body(server: _Server, client: httpx.AsyncClient) -> list[bytes]:
        seen = []
        async with client.stream("GET", server.url, timeout=httpx.Timeout(5, read=0.05)) as r:
            with pytest.raises(httpx.ReadTimeout):
                async for chunk in r.aiter_raw():
                    seen.append(chunk)
        return seen

    assert _run(stalls, in_body) == [b"ab"]


def test_connect_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=AsyncH1Transport()) as client:
            await client.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(scenario())


def test_pool_timeout() -> None:
    async def slow(exchange: _Exchange) -> None:
        await asyncio.sleep(0.3)
        await exchange.send(OK_HEAD + b"Content-Length: 2\r\n\r\nok")

    async def scenario(server: _Server, client: httpx.AsyncClient) -> list[Any]:
        timeout = httpx.Timeout(5, pool=0.05)
        return await asyncio.gather(
            client.get(server.url, timeout=timeout),
            client.get(server.url, timeout=timeout),
            return_exceptions=True,
        )

    results = _run(slow, scenario, max_connections=1)
    assert sorted(type(r).__name__ for r in results) == ["PoolTimeout", "Response"]


def test_a_bounded_pool_waits_for_a_connection() -> None:
    async def scenario(server: _Server, client: httpx.AsyncClient) -> tuple[list[bytes], int]:
        responses = await asyncio.gather(*[_get(server, client) for _ in range(4)])
        return [r.content for r in responses], server.connections

    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    assert _run(_answer(reply, pause=0.01), scenario, max_connections=1) == ([b"ok"] * 4, 1)


# -- request bodies ------------------------------------------------------------------------


def test_request_head_and_bodies() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"

    async def parts() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b""
        yield b"def"

    async def scenario(server: _Server, client: httpx.AsyncClient) -> list[_Exchange]:
        await client.post(server.url + "/p?q=1", content=b"bytes body", headers={"X-Case": "A"})
        await client.post(server.url + "/s", content=parts())
        await client.post(server.url + "/l", content=parts(), headers={"content-length": "6"})
        # (httpx's AsyncClient refuses sync bodies; the transport takes them.)
        request = httpx.Request("POST", server.url + "/i", content=iter([b"sync", b"-it"]))
        transport = client._transport
        response = await transport.handle_async_request(request)
        await response.aread()
        return server.requests

    requests = _run(_answer(reply), scenario)
    first, streamed, sized, sync = requests
    assert first.head.startswith(b"POST /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nX-Case: A\r\n" in first.head and first.body == b"bytes body"
    assert b"transfer-encoding: chunked" in streamed.head.lower() and streamed.body == b"abcdef"
    assert b"transfer-encoding" not in sized.head.lower() and sized.body == b"abcdef"
    assert sync.body == b"sync-it"


# -- TLS and proxies -----------------------------------------------------------------------


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = folder / "cert.pem"
    key_path = folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls_with_a_self_signed_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))
    reply = CHUNKED + b"5\r\nhello\r\n0\r\n\r\n"

    async def main() -> tuple[list[bytes], int, str]:
        async with _Server(_answer(reply), tls=server_context) as server:
            url = f"https://localhost:{server.port}/"
            transport = AsyncH1Transport(ssl_context=trusting)
            async with httpx.AsyncClient(transport=transport) as client:
                bodies = [(await client.get(url)).content for _ in range(2)]
            # Not trusted by default: a typed connect error.
            async with httpx.AsyncClient(transport=AsyncH1Transport()) as client:
                try:
                    await client.get(url)
                except httpx.ConnectError as exc:
                    error = str(exc)
                else:
                    error = ""
            return bodies, server.connections, error

    bodies, connections, error = asyncio.run(main())
    assert bodies == [b"hello", b"hello"]
    assert connections == 1  # kept alive for both (the refused handshake never got this far)
    assert "CERTIFICATE_VERIFY_FAILED" in error


def test_a_proxy_from_the_environment_goes_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"

    async def main() -> list[bytes]:
        async with _Server(_answer(reply)) as proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
            monkeypatch.setenv("NO_PROXY", "direct.test")
            monkeypatch.delenv("http_proxy", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)
            transport = AsyncH1Transport()
            async with httpx.AsyncClient(transport=transport) as client:
                response = await client.get("http://upstream.test/path")
                assert response.content == b"ok"
                with pytest.raises(httpx.ConnectError):
                    await client.get("http://direct.test:9/")  # not proxied: resolved here
            return [request.head.split(b"\r\n")[0] for request in proxy.requests]

    assert asyncio.run(main()) == [b"GET http://upstream.test/path HTTP/1.1"]


@given(
    chunks=st.lists(st.binary(min_size=1, max_size=40), max_size=8),
    extensions=st.booleans(),
    trailers=st.lists(st.sampled_from([b"A: 1", b"B-c: x y", b"D:"]), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_chunked_bodies_in_any_split(
    chunks: list[bytes], extensions: bool, trailers: list[bytes], cuts: list[int]
) -> None:
    ext = b";n=v" if extensions else b""
    body = b""
    spans = []  # where each chunk's data is in the body
    for c in chunks:
        body += b"%x%s\r\n" % (len(c), ext)
        spans.append((len(body), len(body) + len(c)))
        body += c + b"\r\n"
    body += b"0" + ext + b"\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"
    points = sorted({0, len(body), *(c for c in cuts if c < len(body))})
    parser = _chunked_reply()
    out = []
    for start, stop in itertools.pairwise(points):
        assert not parser.ended
        out.append(parser.feed(body[start:stop]))
        # Data is never held back: every data byte read so far is given.
        assert b"".join(out) == b"".join(body[a : min(b, stop)] for a, b in spans if a < stop)
    assert b"".join(out) == b"".join(chunks)
    assert parser.ended


class _PausingTransport(asyncio.Transport):
    """What a connection's flow control calls on its transport, counted."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses = 0
        self.resumes = 0

    def get_extra_info(self, name: Any, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        self.pauses += 1

    def resume_reading(self) -> None:
        self.resumes += 1


def test_reading_pauses_past_the_read_ahead_bound_until_the_reader_takes_it() -> None:
    """What the socket delivers while the reader is behind is bounded: once more than
    ``_HIGH_WATER`` bytes wait, reading pauses (once), and the next read takes them all
    and resumes it."""

    connection = _h1._Connection(AsyncH1Transport(trust_env=False), ("http", "upstream", 80))
    transport = _PausingTransport()
    connection.connection_made(transport)
    piece = b"x" * 4096
    for _ in range(_h1._HIGH_WATER // len(piece)):
        connection.data_received(piece)
    assert transport.pauses == 0  # exactly at the bound
    connection.data_received(b"y")
    connection.data_received(piece)  # a socket read already under way
    assert (transport.pauses, transport.resumes) == (1, 0)
    data = asyncio.run(connection.read(None))
    assert data == piece * (_h1._HIGH_WATER // len(piece)) + b"y" + piece
    assert (transport.pauses, transport.resumes) == (1, 1)
    assert connection.size == 0
