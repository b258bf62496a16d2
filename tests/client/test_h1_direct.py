"""DirectClient: ``stream()`` over AsyncH1Transport's connections without httpx's client
layer. The request bytes it writes, the replies it reads (framings, compression,
errors, early exits), proxies, and streaming calls against the emulator that must give
the same events as through httpx."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from polystream.call import StreamCall
from polystream.client import AsyncEventStream
from polystream.client._h1 import AsyncH1Transport, DirectClient, DirectReply
from polystream.errors import PolystreamError
from polystream.request import Message, Request, TextPart

from .conftest import FAST, MODEL, PREFIX
from .test_h1_transport import CHUNKED, OK_HEAD, _answer, _Exchange, _Server

TIMEOUT = httpx.Timeout(5.0)
Handler = Callable[[_Exchange], Awaitable[None]]


def _direct(transport: AsyncH1Transport, fallback: httpx.AsyncClient | None = None) -> DirectClient:
    return DirectClient(
        transport,
        timeout=TIMEOUT,
        fallback=fallback or httpx.AsyncClient(transport=transport),
        user_agent="ua/1",
    )


def _run(
    handler: Handler,
    scenario: Callable[[_Server, DirectClient, AsyncH1Transport], Awaitable[Any]],
    **kw: Any,
) -> Any:
    async def main() -> Any:
        async with _Server(handler) as server:
            transport = AsyncH1Transport(**kw)
            try:
                return await scenario(server, _direct(transport), transport)
            finally:
                await transport.aclose()

    return asyncio.run(main())


async def _read(client: DirectClient, url: str, **kw: Any) -> tuple[DirectReply, bytes]:
    async with client.stream(
        kw.pop("method", "GET"), url, headers=kw.pop("headers", {}), **kw
    ) as r:
        return r, await r.aread()


# -- what is sent --------------------------------------------------------------------------


def test_request_head_bytes() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"

    async def scenario(server: _Server, client: DirectClient, _: Any) -> tuple[Any, ...]:
        headers = {"content-type": "application/json", "authorization": "Bearer k"}
        await _read(
            client, server.url + "/v1/x?a=b&c=%2F", method="POST", headers=headers, content=b"{}"
        )
        # A caller's Host and framing headers are replaced; its User-Agent and
        # Accept-Encoding are kept.
        await _read(
            client,
            server.url + "/get",
            headers={
                "Host": "evil",
                "Content-Length": "9",
                "user-agent": "mine",
                "accept-encoding": "gzip",
            },
        )
        await _read(client, server.url + "/é x", method="POST", headers={})
        # The first header set again (its lines are kept from the first request), with
        # another body length, and the same headers in another order.
        await _read(client, server.url + "/v1/y", method="POST", headers=headers, content=b"[1,2]")
        await _read(client, server.url + "/v1/y", headers=dict(reversed(headers.items())))
        return server.port, [(e.head, e.body) for e in server.requests]

    port, sent = _run(_answer(reply), scenario)
    host = b"127.0.0.1:%d" % port
    assert sent == [
        (
            b"POST /v1/x?a=b&c=%2F HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"content-type: application/json\r\nauthorization: Bearer k\r\n"
            b"User-Agent: ua/1\r\nAccept-Encoding: identity\r\nContent-Length: 2\r\n\r\n",
            b"{}",
        ),
        (
            b"GET /get HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"user-agent: mine\r\naccept-encoding: gzip\r\n\r\n",
            b"",
        ),
        (
            b"POST /%C3%A9%20x HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"User-Agent: ua/1\r\nAccept-Encoding: identity\r\nContent-Length: 0\r\n\r\n",
            b"",
        ),
        (
            b"POST /v1/y HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"content-type: application/json\r\nauthorization: Bearer k\r\n"
            b"User-Agent: ua/1\r\nAccept-Encoding: identity\r\nContent-Length: 5\r\n\r\n",
            b"[1,2]",
        ),
        (
            b"GET /v1/y HTTP/1.1\r\nHost: " + host + b"\r\n"
            b"authorization: Bearer k\r\ncontent-type: application/json\r\n"
            b"User-Agent: ua/1\r\nAccept-Encoding: identity\r\n\r\n",
            b"",
        ),
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [("x-a", "one\r\nx-b: two"), ("x-a", "line\nbreak"), ("bad name", "v"), ("", "v")],
)
def test_header_injection_is_refused_and_nothing_is_sent(name: str, value: str) -> None:
    async def scenario(server: _Server, client: DirectClient, t: AsyncH1Transport) -> int:
        for _ in range(2):  # refused again: a refused header set is not kept
            with pytest.raises(httpx.LocalProtocolError):
                await _read(client, server.url, headers={name: value})
        return server.connections

    assert _run(_answer(OK_HEAD + b"Content-Length: 0\r\n\r\n"), scenario) == 0


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://127.0.0.1/x", httpx.UnsupportedProtocol),
        ("http:///path", httpx.UnsupportedProtocol),
        ("http://127.0.0.1:99999/x", httpx.InvalidURL),
    ],
)
def test_unusable_urls(url: str, error: type[Exception]) -> None:
    async def main() -> None:
        transport = AsyncH1Transport()
        with pytest.raises(error):
            await _read(_direct(transport), url)

    asyncio.run(main())


# -- what is read --------------------------------------------------------------------------


def test_status_reason_version_and_headers() -> None:
    reply = (
        b"HTTP/1.0 429 Slow Down\r\nX-A: 1\r\nx-a: 2\r\nRetry-After: 3\r\n"
        b'Content-Length: 7\r\n\r\n{"e":1}'
    )

    async def scenario(server: _Server, client: DirectClient, _: Any) -> tuple[Any, ...]:
        response, body = await _read(client, server.url)
        return (
            response.status_code,
            response.reason_phrase,
            response.http_version,
            response.headers,
            body,
        )

    assert _run(_answer(reply), scenario) == (
        429,
        "Slow Down",
        "HTTP/1.0",
        {"x-a": "1, 2", "retry-after": "3", "content-length": "7"},
        b'{"e":1}',
    )


def test_a_streamed_chunked_reply_and_the_connection_kept() -> None:
    parts = [CHUNKED + b"3\r\none\r\n", b"3\r\ntwo\r\n", b"0\r\n\r\n"]

    async def scenario(server: _Server, client: DirectClient, t: AsyncH1Transport) -> Any:
        chunks = []
        async with client.stream("GET", server.url, headers={}) as response:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
        _, again = await _read(client, server.url)
        return chunks, again, server.connections, t._idle_count

    assert _run(_answer(parts, pause=0.01), scenario) == ([b"one", b"two"], b"onetwo", 1, 1)


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate"])
def test_a_compressed_reply_is_decompressed_as_it_arrives(coding: str) -> None:
    text = b"data: compressed\n\n" * 200
    data = zlib.compress(text) if coding == "deflate" else gzip.compress(text)
    cut = len(data) // 2
    parts = [
        CHUNKED.replace(b"\r\n\r\n", b"\r\nContent-Encoding: " + coding.encode() + b"\r\n\r\n"),
        b"%x\r\n%s\r\n" % (cut, data[:cut]),
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(data) - cut, data[cut:]),
    ]

    async def scenario(server: _Server, client: DirectClient, _: Any) -> bytes:
        async with client.stream("GET", server.url, headers={}) as response:
            return b"".join([chunk async for chunk in response.aiter_bytes()])

    assert _run(_answer(parts, pause=0.01), scenario) == text


@pytest.mark.parametrize(
    ("head", "body", "kept"),
    [
        # Not read at all: the connection cannot be reused.
        (b"Content-Encoding: br\r\nContent-Length: 4\r\n", b"abcd", 0),
        # Read to its end (the HTTP framing is whole): the connection is kept.
        (b"Content-Encoding: gzip\r\nContent-Length: 9\r\n", b"not gzip!", 1),
    ],
)
def test_undecodable_replies_are_typed_errors(head: bytes, body: bytes, kept: int) -> None:
    reply = OK_HEAD + head + b"\r\n" + body

    async def scenario(server: _Server, client: DirectClient, t: AsyncH1Transport) -> int:
        with pytest.raises(httpx.DecodingError):
            await _read(client, server.url)
        return t._open

    assert _run(_answer(reply), scenario) == kept


@pytest.mark.parametrize(
    "reply",
    [CHUNKED + b"5\r\nhello\r\n", OK_HEAD + b"Content-Length: 10\r\n\r\nhello"],
)
def test_a_truncated_reply_raises(reply: bytes) -> None:
    async def scenario(server: _Server, client: DirectClient, t: AsyncH1Transport) -> int:
        with pytest.raises(httpx.RemoteProtocolError):
            await _read(client, server.url)
        return t._open

    assert _run(_answer(reply, close=True), scenario) == 0


def test_read_timeout_inside_the_body() -> None:
    async def stalls(exchange: _Exchange) -> None:
        await exchange.send(CHUNKED + b"2\r\nab\r\n")
        await asyncio.sleep(1)

    async def scenario(server: _Server, _: DirectClient, transport: AsyncH1Transport) -> Any:
        client = DirectClient(
            transport,
            timeout=httpx.Timeout(5, read=0.05),
            fallback=httpx.AsyncClient(),
            user_agent="ua",
        )
        seen = []
        async with client.stream("GET", server.url, headers={}) as response:
            with pytest.raises(httpx.ReadTimeout):
                async for chunk in response.aiter_bytes():
                    seen.append(chunk)
        return seen, transport._open

    assert _run(stalls, scenario) == ([b"ab"], 0)


@pytest.mark.parametrize(("drain", "connections"), [(None, 2), (True, 1)])
def test_leaving_a_reply_early(drain: bool | None, connections: int) -> None:
    """Without a drain, the connection is closed; with one saying the call is over,
    the reply's tail is read and the connection reused."""
    reply = [CHUNKED + b"3\r\none\r\n", b"3\r\ntwo\r\n0\r\n\r\n"]

    async def scenario(server: _Server, client: DirectClient, _: Any) -> tuple[Any, ...]:
        async with client.stream("GET", server.url, headers={}) as response:
            async for chunk in response.aiter_bytes():
                first = chunk
                break
        _, again = await _read(client, server.url)
        return first, again, server.connections

    options = {} if drain is None else {"drain": lambda: True}
    assert _run(_answer(reply, pause=0.01), scenario, **options) == (
        b"one",
        b"onetwo",
        connections,
    )


def test_a_proxied_url_goes_through_the_httpx_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url} {request.content!r}")
        return httpx.Response(200, content=b"via fallback")

    async def main() -> tuple[int, bytes, bool, bool]:
        transport = AsyncH1Transport()
        fallback = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        client = _direct(transport, fallback)
        async with client.stream(
            "POST", "http://upstream.test/v1/x", headers={"a": "b"}, content=b"{}"
        ) as response:
            body = await response.aread()
        return (
            response.status_code,
            body,
            transport.proxied("http://upstream.test/"),
            transport.proxied("http://127.0.0.1:9/"),
        )

    assert asyncio.run(main()) == (200, b"via fallback", True, False)
    assert seen == ["POST http://upstream.test/v1/x b'{}'"]


# -- streaming calls -------------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
STREAMS = sorted(
    (path.parent.name, path)
    for path in FIXTURES.glob("*/*")
    if path.suffix in (".sse", ".json")
    and path.parent.name in MODEL
    and not path.name.endswith(".result.json")
)


def _served(data: bytes, framing: str) -> list[bytes]:
    """A fixture as a chunked reply, cut into uneven pieces, each in its own segment."""
    content_type = b"text/event-stream" if framing == "sse" else b"application/json"
    head = CHUNKED.replace(b"\r\n\r\n", b"\r\nContent-Type: " + content_type + b"\r\n\r\n")
    pieces = []
    pos = 0
    size = 7
    while pos < len(data):
        piece = data[pos : pos + size]
        pieces.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        pos += size
        size = size * 3 % 701 + 1
    return [head, *pieces, b"0\r\n\r\n"]


def _fixture_call(dialect: str, request: Request, url: str, framing: str) -> StreamCall:
    """A call of ``dialect`` to the loopback server at ``url``, retrying fast (with the
    same backoff every time)."""
    return StreamCall(
        dialect,
        request,
        api_key="k",
        base_url=url + PREFIX[dialect.split("_", maxsplit=1)[0]],
        policy=FAST,
        framing=framing,
        rng=lambda: 0.5,
    )


def _hi(dialect: str) -> Request:
    """A one-line request to the dialect's model."""
    return Request(
        model=MODEL[dialect],
        messages=[Message(role="user", content=[TextPart(text="hi")])],
        max_tokens=100,
    )


@pytest.mark.parametrize(("dialect", "path"), STREAMS, ids=[f"{d}/{p.name}" for d, p in STREAMS])
def test_streaming_calls_give_the_same_events_as_through_httpx(dialect: str, path: Path) -> None:
    """Every fixture stream, served in uneven segments: the events of a streaming call
    over the direct client are those over httpx (retries and truncations included)."""
    framing = "json_array" if path.suffix == ".json" else "sse"
    request = _hi(dialect)
    reply = _served(path.read_bytes(), framing)

    async def scenario(server: _Server, client: DirectClient, transport: AsyncH1Transport) -> Any:
        async def run(http: Any) -> tuple[list[bytes], bytes]:
            call = _fixture_call(dialect, request, server.url, framing)
            events = []
            with contextlib.suppress(PolystreamError):
                async for event in AsyncEventStream(http, call):
                    events.append(msgspec.json.encode(event))
            return events, msgspec.json.encode(call.result())

        async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT) as through:
            return await run(client), await run(through)

    direct, through_httpx = _run(_answer(reply, pause=0.001), scenario)
    assert direct == through_httpx
    assert direct[0]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_highly_compressed_reply_comes_in_bounded_pieces(coding: str) -> None:
    # 16 MiB of one byte compress to about 16 KiB: read at once, it would be one
    # 16 MiB piece. It comes in pieces of at most INFLATE_STEP, whole and in order.
    from polystream.client._h1 import INFLATE_STEP

    text = b"data: " + b"z" * (16 * 1024 * 1024) + b"\n\n"
    data = zlib.compress(text, 9) if coding == "deflate" else gzip.compress(text, 9)
    assert len(data) < 64 * 1024
    reply = OK_HEAD + b"Content-Encoding: %s\r\nContent-Length: %d\r\n\r\n" % (
        coding.encode(),
        len(data),
    )

    async def scenario(server: _Server, client: DirectClient, _: Any) -> list[int]:
        async with client.stream("GET", server.url, headers={}) as response:
            sizes = []
            pieces = []
            async for chunk in response.aiter_bytes():
                sizes.append(len(chunk))
                pieces.append(chunk)
            assert b"".join(pieces) == text
            return sizes

    sizes = _run(_answer([reply, data]), scenario)
    assert max(sizes) <= INFLATE_STEP
    assert sum(sizes) == len(text)
