"""Pushing a reply: each read's body bytes handed over in the connection's own callback
(``DirectReply.push``) and a streaming call's events likewise
(``AsyncEventStream.push``). Whatever the reads' boundaries, what is pushed and then
read is the body, byte for byte, and the events are those of reading it."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from polystream.call import StreamCall
from polystream.client import AsyncEventStream
from polystream.client._h1 import AsyncH1Transport, DirectClient
from polystream.errors import PolystreamError
from polystream.events import Event, Warning
from polystream.request import Message, Request, TextPart

from .conftest import FAST
from .test_h1_direct import STREAMS, _direct, _fixture_call, _hi, _served
from .test_h1_transport import CHUNKED, OK_HEAD, _Exchange, _Server


class _Sink:
    """Records what a pushed reply hands over; stops after ``stop_after`` reads."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.data: list[bytes] = []
        self.halts = 0
        self.stop_after = stop_after

    def body(self, data: bytes) -> bool:
        assert data
        self.data.append(data)
        return self.stop_after is None or len(self.data) < self.stop_after

    def halt(self) -> None:
        self.halts += 1


def _pieces(data: bytes, cut: str) -> list[bytes]:
    if cut == "whole":
        return [data]
    if cut == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    rng = random.Random(7)
    out = []
    pos = 0
    while pos < len(data):
        size = rng.randint(1, 9)
        out.append(data[pos : pos + size])
        pos += size
    return out


async def _pushed_reply(
    rest: list[bytes],
    sink: _Sink,
    *,
    first: bytes = CHUNKED + b"5\r\nfirst\r\n",
    close: bool = False,
    read_timeout: float = 5.0,
) -> tuple[bytes, list[bytes], Exception | None, int, int, bool]:
    """A reply whose first read is read, then pushed to ``sink`` while ``rest`` arrives
    (each piece in its own segment); then read to its end. (first read, what was read
    after pushing, the error that read raised, open and idle connections, whether
    pushing started)."""
    go = asyncio.Event()

    async def handler(exchange: _Exchange) -> None:
        await exchange.send(first)
        await go.wait()
        await exchange.send(rest, pause=0.001)
        if close:
            exchange.close()

    async with _Server(handler) as server:
        transport = AsyncH1Transport()
        client = DirectClient(
            transport,
            timeout=httpx.Timeout(5.0, read=read_timeout),
            fallback=httpx.AsyncClient(transport=transport),
            user_agent="ua/1",
        )
        after: list[bytes] = []
        error: Exception | None = None
        try:
            async with client.stream("GET", server.url, headers={}) as reply:
                chunks = reply.aiter_bytes()
                head = await chunks.__anext__()
                started = reply.push(sink)
                go.set()
                for _ in range(200):
                    if sink.halts or (sink.stop_after and len(sink.data) >= sink.stop_after):
                        break
                    await asyncio.sleep(0.01)
                try:
                    async for chunk in chunks:
                        after.append(chunk)
                except httpx.HTTPError as exc:
                    error = exc
            return head, after, error, transport._open, transport._idle_count, started
        finally:
            await transport.aclose()


REST = b"4\r\nabcd\r\n3;ext=1\r\nxyz\r\n1a\r\n" + b"q" * 26 + b"\r\n0\r\n\r\n"


@pytest.mark.parametrize("cut", ["whole", "bytes", "random"])
def test_a_pushed_chunked_body_is_the_body_whatever_the_reads(cut: str) -> None:
    sink = _Sink()
    head, after, error, _, idle, started = asyncio.run(_pushed_reply(_pieces(REST, cut), sink))
    assert started and head == b"first"
    assert b"".join(sink.data) == b"abcdxyz" + b"q" * 26
    # The end of the body stops pushing; the reader then finds the body ended, and the
    # connection went back to the pool.
    assert sink.halts == 1 and after == [] and error is None and idle == 1


def test_a_pushed_content_length_body() -> None:
    sink = _Sink()
    first = OK_HEAD + b"Content-Length: 12\r\n\r\nab"
    _, after, error, _, idle, started = asyncio.run(
        _pushed_reply([b"cdef", b"ghij", b"kl"], sink, first=first)
    )
    assert started and b"".join(sink.data) == b"cdefghijkl"
    assert sink.halts == 1 and after == [] and error is None and idle == 1


def test_a_sink_that_stops_leaves_the_next_reads_to_the_reader() -> None:
    sink = _Sink(stop_after=1)
    rest = [b"3\r\none\r\n", b"3\r\ntwo\r\n", b"5\r\nthree\r\n", b"0\r\n\r\n"]
    _, after, error, _, idle, _ = asyncio.run(_pushed_reply(rest, sink))
    assert sink.data == [b"one"] and sink.halts == 0
    assert b"".join(after) == b"twothree" and error is None and idle == 1


@pytest.mark.parametrize(
    ("rest", "close", "kind"),
    [
        ([b"3\r\none\r\n", b"zz\r\nbad"], False, httpx.RemoteProtocolError),
        ([b"3\r\none\r\n"], True, httpx.RemoteProtocolError),
    ],
    ids=["bad framing", "closed mid-body"],
)
def test_a_failure_while_pushed_is_raised_by_the_next_read(
    rest: list[bytes], close: bool, kind: type[Exception]
) -> None:
    sink = _Sink()
    _, after, error, opened, _, _ = asyncio.run(_pushed_reply(rest, sink, close=close))
    assert sink.data == [b"one"] and sink.halts == 1
    assert after == [] and isinstance(error, kind) and opened == 0


def test_pushing_is_refused_while_bytes_wait_and_for_a_compressed_reply() -> None:
    async def main() -> tuple[bool, bool, bool]:
        async def handler(exchange: _Exchange) -> None:
            if exchange.head.startswith(b"GET /gzip"):
                await exchange.send(
                    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"
                )
                return
            await exchange.send([CHUNKED + b"3\r\none\r\n", b"3\r\ntwo\r\n"], pause=0.05)
            await exchange.send(b"0\r\n\r\n")

        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            client = _direct(transport)
            try:
                async with client.stream("GET", server.url, headers={}) as reply:
                    chunks = reply.aiter_bytes()
                    await chunks.__anext__()
                    await asyncio.sleep(0.2)  # "two" waits in the connection's buffer
                    waiting = reply.push(_Sink())
                    assert [c async for c in chunks] == [b"two"]
                    ended = reply.push(_Sink())
                async with client.stream("GET", server.url + "/gzip", headers={}) as reply:
                    compressed = reply.push(_Sink())
                return waiting, ended, compressed
            finally:
                await transport.aclose()

    assert asyncio.run(main()) == (False, False, False)


def test_a_silence_while_pushed_is_the_read_timeout() -> None:
    sink = _Sink(stop_after=1)
    # Only one more chunk arrives, then nothing (the server waits past the timeout).
    _, after, error, opened, _, _ = asyncio.run(
        _pushed_reply([b"3\r\none\r\n"], sink, read_timeout=0.2)
    )
    # The body's own pushing keeps no timer (AsyncEventStream's does): once the sink
    # stops, the reader's read times out as it does without pushing.
    assert sink.data == [b"one"] and after == []
    assert isinstance(error, httpx.ReadTimeout) and opened == 0


# -- a streaming call's events, pushed ---------------------------------------------------------

SSE_HEAD = CHUNKED.replace(b"\r\n\r\n", b"\r\nContent-Type: text/event-stream\r\n\r\n")
"""A chunked reply's head, for an event stream."""
MESSAGE_START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
)
OVERLOADED = (
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
    b'"message":"Overloaded"}}\n\n'
)
ANTHROPIC_REST = (
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"fine"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
    b'"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
"""An Anthropic Messages reply after its ``message_start``: the text ``fine``."""


def _chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


ANTHROPIC_REPLY = SSE_HEAD + _chunk(MESSAGE_START) + _chunk(ANTHROPIC_REST) + b"0\r\n\r\n"
"""A whole Anthropic Messages reply (the text ``fine``), as one write."""


async def _events_pushing(stream: AsyncEventStream) -> list[Event]:
    """Every event of ``stream``: read by batches, and pushed wherever it can be."""
    events: list[Event] = []

    def handle(batch: list[Event]) -> bool:
        assert batch
        events.extend(batch)
        return True

    with contextlib.suppress(PolystreamError):
        async for batch in stream.batches(openings=True):
            events.extend(batch)
            while (future := stream.push(handle)) is not None:
                try:
                    events.extend(await future)
                finally:
                    stream.stop_push()
    return events


@pytest.mark.parametrize(("dialect", "path"), STREAMS, ids=[f"{d}/{p.name}" for d, p in STREAMS])
def test_a_pushed_streaming_call_gives_the_events_of_reading_it(dialect: str, path: Path) -> None:
    """Every fixture stream, in uneven segments (retries and truncations included): the
    events and the result of a call pushed wherever it can be are those of reading it."""
    framing = "json_array" if path.suffix == ".json" else "sse"
    request = _hi(dialect)
    reply = _served(path.read_bytes(), framing)
    pushes: list[int] = []

    async def handler(exchange: _Exchange) -> None:
        await exchange.send(reply, pause=0.001)

    async def main() -> tuple[Any, Any]:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            client = _direct(transport)

            def call() -> StreamCall:
                return _fixture_call(dialect, request, server.url, framing)

            try:
                pushed = AsyncEventStream(client, call())
                original_push = pushed.push

                def counting(handle: Any) -> Any:
                    future = original_push(handle)
                    pushes.append(future is not None)
                    return future

                pushed.push = counting  # type: ignore[method-assign]
                got = await _events_pushing(pushed)
                read = AsyncEventStream(client, call())
                expected: list[Event] = []
                with contextlib.suppress(PolystreamError):
                    async for event in read:
                        expected.append(event)
                encode = msgspec.json.encode
                return (
                    ([encode(e) for e in got], encode(pushed.call.result())),
                    ([encode(e) for e in expected], encode(read.call.result())),
                )
            finally:
                await transport.aclose()

    got, expected = asyncio.run(main())
    assert got == expected and got[0]
    assert any(pushes)  # pushing took part


def test_a_call_pushed_through_a_silence_times_out_as_when_read() -> None:
    """A reply that stalls while pushed: the call ends as a stalled read does (its
    ``no data`` truncation), after about the read timeout, not twice it."""
    body = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},'
        b'"finish_reason":null}]}\n\n'
    )

    async def handler(exchange: _Exchange) -> None:
        await exchange.send(SSE_HEAD + b"%x\r\n%s\r\n" % (len(body), body))
        await asyncio.sleep(2)

    async def main() -> tuple[list[str], float]:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            client = DirectClient(
                transport,
                timeout=httpx.Timeout(5.0, read=0.5),
                fallback=httpx.AsyncClient(transport=transport),
                user_agent="ua/1",
            )
            call = StreamCall(
                "openai_chat",
                Request(model="m", messages=[Message(role="user", content=[TextPart(text="x")])]),
                api_key="k",
                base_url=server.url + "/v1",
                policy=FAST,
                resume=False,
            )
            stream = AsyncEventStream(client, call)
            loop = asyncio.get_running_loop()
            start = loop.time()
            try:
                events = await _events_pushing(stream)
            finally:
                await transport.aclose()
            return [type(e).__name__ for e in events], loop.time() - start

    names, took = asyncio.run(main())
    assert names[-1] in ("Finish", "ErrorEvent") and "TextDelta" in names
    assert 0.45 < took < 0.95, took  # (twice the timeout would be 1 s)


def test_a_retry_decided_while_pushed_goes_back_to_the_task_at_once() -> None:
    """An in-band overload before any output, arriving while pushed, on a reply that
    then stalls without ending: the retry decision is handed back (the future gives
    it, ``handle`` never sees it) and the call starts over at once, not after the stall
    or the read timeout."""

    async def handler(exchange: _Exchange) -> None:
        if exchange.connection == 1:
            await exchange.send([SSE_HEAD, _chunk(MESSAGE_START), _chunk(OVERLOADED)], pause=0.05)
            await asyncio.sleep(3)  # no end of the body
        else:
            await exchange.send(ANTHROPIC_REPLY)

    handed: list[Event] = []
    returned: list[Event] = []
    pushes: list[int] = []

    def handle(batch: list[Event]) -> bool:
        handed.extend(batch)
        return True

    async def main() -> tuple[float, str, int]:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            client = _direct(transport)
            call = _fixture_call("anthropic_messages", _hi("anthropic_messages"), server.url, "sse")
            stream = AsyncEventStream(client, call)
            loop = asyncio.get_running_loop()
            began = loop.time()
            try:
                async for batch in stream.batches(openings=True):
                    returned.extend(batch)
                    while (future := stream.push(handle)) is not None:
                        pushes.append(len(returned))
                        try:
                            returned.extend(await future)
                        finally:
                            stream.stop_push()
            finally:
                await transport.aclose()
            return loop.time() - began, call.result().text, server.connections

    took, text, connections = asyncio.run(main())
    assert text == "fine" and connections == 2
    assert pushes[0] == 0  # pushed from the first reply's opening
    assert [e.code for e in returned if isinstance(e, Warning)] == ["retry"]
    assert not [e for e in handed if isinstance(e, Warning)]
    assert took < 1.0, took  # (the stall is 3 s)


def test_opening_events_held_back_are_shown_to_the_opening_hook_and_dropped_by_a_retry() -> None:
    """``push(handle, opening)``: a read whose events the call holds back (the opening,
    before any output) shows them to ``opening``, in the connection's callback; a
    retry drops them (they are never delivered), and the retry's own opening is
    delivered once."""

    async def handler(exchange: _Exchange) -> None:
        if exchange.connection == 1:
            await exchange.send([SSE_HEAD, _chunk(MESSAGE_START), _chunk(OVERLOADED)], pause=0.05)
            await asyncio.sleep(3)
        else:
            await exchange.send(ANTHROPIC_REPLY)

    delivered: list[Event] = []
    opened: list[list[Event]] = []

    def handle(batch: list[Event]) -> bool:
        delivered.extend(batch)
        return True

    def opening(held: list[Event]) -> None:
        opened.append(list(held))

    async def main() -> str:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            call = _fixture_call("anthropic_messages", _hi("anthropic_messages"), server.url, "sse")
            stream = AsyncEventStream(_direct(transport), call)
            try:
                async for batch in stream.batches(openings=True):
                    delivered.extend(batch)
                    while (future := stream.push(handle, opening)) is not None:
                        try:
                            delivered.extend(await future)
                        finally:
                            stream.stop_push()
            finally:
                await transport.aclose()
            return call.result().text

    assert asyncio.run(main()) == "fine"
    held_names = [[type(e).__name__ for e in held] for held in opened]
    assert held_names == [["StreamStart", "UsageUpdate"]]  # message_start's
    assert not [e for e in delivered if any(e is h for h in opened[0])]  # dropped
    names = [type(e).__name__ for e in delivered]
    assert names.count("StreamStart") == 1 and names.index("StreamStart") < names.index(
        "BlockStart"
    )


def test_a_read_held_back_whole_is_an_empty_batch_where_pushing_can_begin() -> None:
    """A reply whose opening arrives with its head (pushing is refused while its bytes
    wait), then its output a read later: with ``openings``, the read the call holds back
    whole is an empty batch too, with ``call.held`` showing it, and pushing begins
    there."""
    role = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"finish_reason":null}]}\n\n'
    )
    text = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )

    async def handler(exchange: _Exchange) -> None:
        await exchange.send([SSE_HEAD + _chunk(role), _chunk(text) + b"0\r\n\r\n"], pause=0.05)

    seen: list[tuple[int, list[str], bool]] = []  # per batch: size, held, pushing began
    handed: list[Event] = []

    def handle(batch: list[Event]) -> bool:
        handed.extend(batch)
        return True

    async def main() -> str:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            call = _fixture_call("openai_chat", _hi("openai_chat"), server.url, "sse")
            stream = AsyncEventStream(_direct(transport), call)
            try:
                async for batch in stream.batches(openings=True):
                    held = [type(e).__name__ for e in call.held]
                    future = stream.push(handle)
                    seen.append((len(batch), held, future is not None))
                    if future is not None:
                        try:
                            handed.extend(await future)
                        finally:
                            stream.stop_push()
            finally:
                await transport.aclose()
            return call.result().text

    assert asyncio.run(main()) == "hi"
    # The opening (its bytes wait: no push), then the held read (push begins there).
    assert seen[:2] == [(0, [], False), (0, ["StreamStart", "StatusUpdate"], True)]
    assert [type(e).__name__ for e in handed][:4] == [
        "StreamStart",
        "StatusUpdate",
        "BlockStart",
        "TextDelta",
    ]


@pytest.mark.parametrize("by", ["batches", "events"])
def test_closing_a_stream_mid_reply_releases_its_connection_before_aclose_returns(
    by: str,
) -> None:
    """``aclose()`` on a stream in the middle of a reply closes the reply's connection
    itself, in the task that calls it: nothing is left to the event loop's finalizer
    of an abandoned generator (a later task, woken through the loop's self-pipe)."""
    text = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},'
        b'"finish_reason":null}]}\n\n'
    )

    async def handler(exchange: _Exchange) -> None:
        await exchange.send(SSE_HEAD + _chunk(text))
        await asyncio.sleep(3)  # the rest never comes

    async def main() -> tuple[int, int, list[str]]:
        async with _Server(handler) as server:
            transport = AsyncH1Transport()
            call = _fixture_call("openai_chat", _hi("openai_chat"), server.url, "sse")
            stream = AsyncEventStream(_direct(transport), call)
            names: list[str] = []
            try:
                if by == "batches":
                    async for batch in stream.batches():
                        names += [type(e).__name__ for e in batch]
                        if "TextDelta" in names:
                            break
                else:
                    async for event in stream:
                        names.append(type(event).__name__)
                        if type(event).__name__ == "TextDelta":
                            break
                opened = transport._open
                await stream.aclose()
                return opened, transport._open, names
            finally:
                await transport.aclose()

    opened, after, names = asyncio.run(main())
    assert names[-1] == "TextDelta"
    assert (opened, after) == (1, 0)
