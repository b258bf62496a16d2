"""The gateway's streaming path: events that are ready together leave in one write, yet
every event is whole, in order and with its own cursor; the first event leaves as soon
as it is transcoded; upstream connections stay pooled."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import polystream
from polystream.events import BlockEnd, BlockStart, Finish, FinishReason, StreamStart, TextDelta
from polystream.gateway_core import load_config
from polystream.scenario import Emulator, parse_scenarios
from polystream.server import ServerThread, _gateway_stream
from polystream.server import gateway as gateway_module
from polystream.wire.sse import ServerSentEvent, SSEDecoder

from .conftest import GATEWAY_KEY, AppThread

HEADERS = {"x-api-key": GATEWAY_KEY}


def _messages_body(text: str = "hi") -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 50,
        "stream": True,
        "messages": [{"role": "user", "content": text}],
    }


def _post(gateway: AppThread, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=body, timeout=60
    )


@pytest.mark.parametrize("upstream", ["anthropic_messages", "openai_chat"])
def test_a_burst_arrives_whole_in_order_with_every_cursor(
    stack: Callable[..., Any], upstream: str
) -> None:
    # Thousands of events with no delay: the upstream outruns the client, so many
    # events are ready at once and leave in shared writes.
    deltas = [f"w{i} " for i in range(3000)]
    _, gateway = stack(upstream, [{"reply": {"text": deltas}}])
    response = _post(gateway, _messages_body())
    assert response.status_code == 200
    stream_id = response.headers["x-polystream-stream-id"]
    events = [f for f in SSEDecoder().feed(response.content) if isinstance(f, ServerSentEvent)]
    assert [e.id for e in events] == [f"{stream_id}.{n}" for n in range(1, len(events) + 1)]
    result = polystream.decode(response.content, "anthropic_messages")
    assert result.status == "completed"
    assert result.text == "".join(deltas)
    unified = polystream.decode_events(response.content, "anthropic_messages")
    assert [e.delta for e in unified if isinstance(e, TextDelta)] == deltas


def test_same_dialect_pass_through_keeps_the_upstream_bytes(
    stack: Callable[..., Any],
) -> None:
    scenarios = [{"reply": {"text": [f"t{i} " for i in range(500)]}}]
    body = _messages_body()
    body["model"] = "claude-haiku-4-5"
    # Two emulators with the same scenarios give the same ids to their first reply.
    with ServerThread(Emulator(parse_scenarios(scenarios))) as direct:
        native = httpx.post(
            direct.base_url + "/anthropic/v1/messages", json=body, timeout=60
        ).content
    _, gateway = stack("anthropic_messages", scenarios)
    through = _post(gateway, body).content
    without_ids = re.sub(rb"(?m)^id: [^\n]*\n", b"", through)
    assert polystream.decode_events(without_ids, "anthropic_messages") == (
        polystream.decode_events(native, "anthropic_messages")
    )


def test_the_first_event_leaves_before_the_upstream_ends(stack: Callable[..., Any]) -> None:
    _, gateway = stack(
        "openai_chat", [{"reply": {"text": ["a", "b", "c", "d"]}, "timing": {"delay": 0.3}}]
    )
    started = time.monotonic()
    arrivals: list[float] = []
    received = b""
    with httpx.stream(
        "POST",
        gateway.base_url + "/anthropic/v1/messages",
        headers=HEADERS,
        json=_messages_body(),
        timeout=30,
    ) as response:
        for chunk in response.iter_raw():
            received += chunk
            if b"text_delta" in chunk:
                arrivals.append(time.monotonic() - started)
    assert polystream.decode(received, "anthropic_messages").text == "abcd"
    assert len(arrivals) >= 3  # the deltas came one by one, as the upstream sent them
    assert arrivals[0] < arrivals[-1] - 0.5


def test_many_streams_at_once_stay_separate(stack: Callable[..., Any]) -> None:
    deltas = [f"x{i} " for i in range(200)]
    _, gateway = stack("openai_chat", [{"reply": {"text": deltas}, "timing": {"delay": 0.002}}])

    async def one(client: httpx.AsyncClient) -> str:
        response = await client.post(
            gateway.base_url + "/anthropic/v1/messages", headers=HEADERS, json=_messages_body()
        )
        return polystream.decode(response.content, "anthropic_messages").text

    async def many() -> list[str]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*(one(client) for _ in range(30)))

    assert asyncio.run(many()) == ["".join(deltas)] * 30


# -- the pieces --------------------------------------------------------------------------


def test_the_gateway_keeps_no_running_result(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    real = gateway_module.StreamCall

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(real(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(gateway_module, "StreamCall", recording)
    _, gateway = stack("openai_chat", [{"reply": {"text": ["a", "b"]}}])
    response = _post(gateway, _messages_body())
    assert polystream.decode(response.content, "anthropic_messages").text == "ab"
    assert len(calls) == 1
    assert calls[0].accumulator is None and calls[0].events is None


def test_sequential_requests_reuse_one_upstream_connection(stack: Callable[..., Any]) -> None:
    _, gateway = stack("openai_chat", [{"reply": {"text": [f"r{i} " for i in range(20)]}}])
    for _ in range(5):
        response = _post(gateway, _messages_body())
        assert polystream.decode(response.content, "anthropic_messages").status == "completed"
    transport = gateway.app.http._transport
    assert transport._open == 1
    # The last reply's connection goes back to the pool once the gateway has read the
    # upstream's terminator, after the client saw the end: wait for that, in bounds.
    deadline = time.monotonic() + 5
    while transport._idle_count != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert transport._open == 1 and transport._idle_count == 1


class _OneRead:
    """An upstream stream whose whole reply arrives in one read (one batch)."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.closed = False
        self.call = types.SimpleNamespace(finished=False)

    def _deliver(self) -> list[Any]:
        self.call.finished = True  # as a StreamCall does once it delivers the Finish
        return self.events

    def batches(self) -> Any:
        async def run() -> Any:
            yield self._deliver()

        return run()

    async def aclose(self) -> None:
        self.closed = True


def test_the_first_output_of_a_read_leaves_at_once_and_the_rest_together() -> None:
    """Opening events and the first delta leave in one write as soon as the delta is
    encoded; the rest of the same read, which holds the terminal event, leaves in one
    more write that also ends the response."""
    reply = [
        StreamStart(dialect="openai_chat", id="c1", model="m"),
        BlockStart(index=0, kind="text"),
        *[TextDelta(index=0, delta=w) for w in ("one ", "two ", "three")],
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="stop", raw="stop")),
    ]
    gateway = gateway_module.create_gateway(load_config(b'{"upstreams": {}}'))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    upstream = _OneRead(reply)
    asyncio.run(
        gateway._stream(send, receive, "anthropic_messages", {}, upstream)  # type: ignore[attr-defined]
    )
    assert [m["type"] for m in sent] == ["http.response.start"] + ["http.response.body"] * 2
    first, rest = (m["body"] for m in sent[1:])
    first_text = polystream.decode(first, "anthropic_messages", strict=False)
    assert first_text.text == "one "
    assert [m.get("more_body") for m in sent[1:]] == [True, False]
    assert polystream.decode(first + rest, "anthropic_messages").text == "one two three"
    assert upstream.closed


def test_a_client_that_stops_taking_writes_gets_every_byte_once_it_reads_again(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that reads slowly, within the slow-client limit: on polystream's own
    server, reads handled in the upstream connection's callback find the client not
    taking writes, and leave their bytes to the request's task; the client still gets
    the whole stream, in order, once."""
    from polystream.server import _h1server

    refused: list[int] = []
    real = _h1server._Cycle.send_nowait

    def counting(self: Any, message: dict[str, Any]) -> bool:
        sent = real(self, message)
        if not sent:
            refused.append(len(message.get("body", b"")))
        return sent

    monkeypatch.setattr(_h1server._Cycle, "send_nowait", counting)
    made = _h1server._Connection.connection_made

    def small_send_buffer(self: Any, transport: Any) -> None:
        # As on a slow network: the kernel holds little of what the gateway writes.
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        made(self, transport)

    monkeypatch.setattr(_h1server._Connection, "connection_made", small_send_buffer)
    deltas = [f"word{i:05d} " * 8 for i in range(3000)]
    # Paced, so that reads arrive one by one and are handled in the upstream
    # connection's callback while the client is not reading.
    scenario = {"reply": {"text": deltas}, "timing": {"first_event": 0, "delay": 0.0003}}
    _, gateway = stack("openai_chat", [scenario])
    body = httpx.Request("POST", "/", json=_messages_body() | {"model": "claude-x"}).content

    async def slow_read() -> bytes:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window
        sock.connect(("127.0.0.1", gateway.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(
            b"POST /anthropic/v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
            b"\r\nx-api-key: %b\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%b"
            % (GATEWAY_KEY.encode(), len(body), body)
        )
        await asyncio.sleep(1.5)  # the gateway's writes back up meanwhile
        data = bytearray()
        while chunk := await reader.read(8192):
            data += chunk
            await asyncio.sleep(0.001)
        writer.close()
        return bytes(data)

    raw = asyncio.run(slow_read())
    head, _, chunked = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    content = b""
    while True:
        size_line, _, chunked = chunked.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        content += chunked[:size]
        chunked = chunked[size + 2 :]
    result = polystream.decode(content, "anthropic_messages")
    assert result.status == "completed" and result.text == "".join(deltas)
    if gateway.server == "polystream":
        assert refused  # the callback's writes did find the client not taking them


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/openai/v1/chat/completions", "openai_chat"),
        ("/anthropic/v1/messages", "anthropic_messages"),
    ],
    ids=["chat", "chat-to-messages"],
)
def test_held_opening_events_are_encoded_as_they_come_and_leave_with_the_first_output(
    stack: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, path: str, dialect: str
) -> None:
    """A paced Chat upstream sends its role chunk (a stream start, held by the call
    until the first text, so that a retry can start over unseen) a read ahead of the
    first delta. On polystream's own server the gateway encodes the held events when
    that read arrives, writes nothing, and writes them with the first delta: the
    client's bytes are those of a gateway that encodes nothing ahead, byte for byte."""
    from polystream.call import StreamCall
    from polystream.dialects import get_dialect

    encoder_class = type(get_dialect(dialect).encoder())
    real_encode = encoder_class.encode
    encoded: list[tuple[float, str]] = []

    def timed_encode(self: Any, event: Any) -> bytes:
        if _encoded_by_gateway():
            encoded.append((time.monotonic(), type(event).__name__))  # (not the emulator's)
        return real_encode(self, event)  # type: ignore[no-any-return]

    monkeypatch.setattr(encoder_class, "encode", timed_encode)
    delay = 0.08  # between the role chunk and each delta
    deltas = [f"w{i} " for i in range(4)]
    scenarios = [{"reply": {"text": deltas}, "timing": {"first_event": 0, "delay": delay}}]
    body = {"model": "x", "max_tokens": 50, "stream": True}
    body["messages"] = [{"role": "user", "content": "hi"}]

    def through() -> tuple[bytes, str, float]:
        """The client's bytes, the server, and how long after the stream's start was
        encoded its first delta was."""
        encoded.clear()
        # (Each stack's emulator is new: its first reply has the same ids.)
        _, gateway = stack("openai_chat", scenarios)
        response = httpx.post(gateway.base_url + path, headers=HEADERS, json=body, timeout=30)
        assert response.status_code == 200
        started = next(t for t, name in encoded if name == "StreamStart")
        first = next(t for t, name in encoded if name == "TextDelta")
        return response.content, gateway.server, first - started

    with_ahead, server, gap = through()
    # The same with nothing held in sight: the held events are encoded with the first
    # output, as they were before anything was encoded ahead.
    monkeypatch.setattr(StreamCall, "held", property(lambda self: []))
    without, _, gap_without = through()

    def normalized(data: bytes) -> bytes:
        # (The gateway's cursors name its stream; the emulator's clock dates the chunks;
        # a message id made for Anthropic's dialect from Chat's is new each time.)
        data = re.sub(rb"(?m)^id: [^\n]*\n", b"", data)
        data = re.sub(rb'"id":"msg_[^"]*"', b'"id":"msg_"', data)
        return re.sub(rb'"created":\d+', b'"created":0', data)

    assert normalized(with_ahead) == normalized(without)
    assert polystream.decode(with_ahead, dialect).text == "".join(deltas)
    assert gap_without < delay / 2  # encoded in one read
    if server == "polystream":
        assert gap > delay / 2  # the role chunk's read, a delay before the first delta's
    else:
        assert gap < delay / 2  # (another server has no send without waiting: no push)


def _encoded_by_gateway() -> bool:
    """Whether an encoder's caller is the gateway (its stream pump, a few frames up
    through ``encode_entries``), not the emulator."""
    names = (gateway_module.__name__, _gateway_stream.__name__)
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_globals["__name__"] in names:
            return True
        frame = frame.f_back
    return False
