"""The gateway's translated WebSocket connections: a client of one conversation family
served by an upstream of another, through :class:`polystream.realtime._bridge.Bridge`.

Everything is decided by the bridge (sans-I/O); here messages are moved: each client
message is given to the bridge and what it makes is sent (to the upstream, then to the
client), each upstream message likewise. A step's messages leave in order, and the
steps in the order they were made (one lock per connection). Each side is read one
message at a time, the next only once what the last one made is sent, so a side that
does not read holds the other back (as the plain relay does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from polystream.gateway_core import relayed_close_code, scrub, scrub_socket_message
from polystream.realtime._bridge import Bridge, Step

if TYPE_CHECKING:
    from polystream.scrub import Scrubber

__all__ = ["BridgedConnection"]

logger = logging.getLogger("polystream.gateway")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BridgedConnection:
    """One accepted client connection and its upstream, of another family.

    Args:
        client: The client's family.
        upstream_family: The upstream's family.
        model: The model the client named.
        upstream_model: The model asked of the upstream (as its route rewrites it).
        receive: The client's ASGI receive.
        send: The client's ASGI send.
        upstream: The upstream's open connection.
        secrets: What is scrubbed from what the client sees.
        on_upstream: Told of each message read from the upstream.
    """

    def __init__(
        self,
        client: str,
        upstream_family: str,
        *,
        model: str,
        upstream_model: str,
        receive: Receive,
        send: Send,
        upstream: ClientConnection,
        secrets: Scrubber,
        on_upstream: Callable[[str | bytes], None],
    ) -> None:
        self.bridge = Bridge(
            client,
            upstream_family,
            model=model,
            upstream_model=upstream_model,
            created=int(time.time()),
            seed=_seed(),
        )
        self.receive = receive
        self.send = send
        self.upstream = upstream
        self.secrets = secrets
        self.on_upstream = on_upstream
        self.lock = asyncio.Lock()
        self.sending = False  # a write to the client is waiting
        self.client_gone = False
        self.inbound = 0  # client messages read
        self.outbound = 0  # messages sent to the client
        self.closing: tuple[int, str] | None = None  # the bridge closed the client so

    async def open(self) -> None:
        """The connection was accepted: the client's first messages, the upstream's
        configuration."""
        await self.deliver(self.bridge.open())

    async def downstream(self) -> None:
        """The upstream's messages, until it closes; then the replies it cut short end
        failed on the client's side."""
        try:
            async for message in self.upstream:
                self.on_upstream(message)
                await self.deliver(self.bridge.upstream(message))
        except ConnectionClosed:
            pass
        if not self.client_gone:
            await self.deliver(self.bridge.close())

    async def upstream_bound(self) -> tuple[int | None, str] | None:
        """The client's messages; returns its close code and reason when it closes or
        goes, None when the upstream is found closed."""
        try:
            while True:
                message = await self.receive()
                kind = message["type"]
                if kind == "websocket.receive":
                    self.inbound += 1
                    text = message.get("text")
                    data: str | bytes = text if text is not None else message.get("bytes") or b""
                    await self.deliver(self.bridge.client(data))
                elif kind == "websocket.disconnect":
                    return message.get("code"), message.get("reason") or ""
        except ConnectionClosed:
            return None

    async def deliver(self, step: Step) -> None:
        """Send what a step made: to the upstream, then to the client (then close
        the client, when the step says so)."""
        async with self.lock:
            for out in step.upstream:
                await self.upstream.send(out)
            for message in step.client:
                if self.client_gone:
                    return
                frame: Message = (
                    {"type": "websocket.send", "bytes": message}
                    if isinstance(message, bytes)
                    else {
                        "type": "websocket.send",
                        "text": scrub_socket_message(message, self.secrets),
                    }
                )
                self.sending = True
                try:
                    await self.send(frame)
                except OSError:  # (the server's "client disconnected")
                    self.client_gone = True
                    return
                finally:
                    self.sending = False
                self.outbound += 1
            if step.close is not None and not self.client_gone:
                code, reason = step.close
                self.closing = step.close
                self.client_gone = True
                with contextlib.suppress(OSError):
                    await self.send({"type": "websocket.close", "code": code, "reason": reason})
                await self.upstream.close(1000)


async def run_bridged(
    connection: BridgedConnection,
    *,
    close_client: Callable[[int, str], Awaitable[None]],
    close_upstream: Callable[[int], Awaitable[None]],
    watch: Callable[[BridgedConnection, asyncio.Task[None]], Any],
    first: str | None = None,
) -> str:
    """Run a translated connection to its end (``first``: the client's first message,
    read already: the one that named the model); returns how it ended (for the log)."""
    upstream = connection.upstream
    await connection.open()
    if first is not None:
        connection.inbound += 1
        await connection.deliver(connection.bridge.client(first))
    down = asyncio.create_task(connection.downstream())
    up = asyncio.create_task(connection.upstream_bound())
    watchdog = watch(connection, down)
    try:
        done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        down.cancel()
        up.cancel()
        await close_upstream(1001)
        raise
    finally:
        watchdog.stop()
    ended = up.result() if up in done else None
    if ended is not None:
        code, reason = ended
        connection.client_gone = True
        await upstream.close(relayed_close_code(code, upstream=False), reason)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(down, 5.0)
        return f"client closed {code}"
    if not down.done():
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(down), 5.0)
        if not down.done():
            down.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await down
    up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await up
    if down.cancelled():
        connection.client_gone = True
        await close_upstream(1001)
        return "client too slow"
    failure = down.exception()
    if failure is not None:
        await close_upstream(1011)
        raise failure
    if connection.closing is not None:
        return f"closed the client {connection.closing[0]}"
    if connection.client_gone:
        return "client gone"
    received = upstream.close_code
    code = relayed_close_code(received, upstream=True)
    reason = scrub(upstream.close_reason or "", connection.secrets)
    if received in (None, 1006, 1015):
        reason = reason or "upstream connection lost"
    await close_client(code, reason)
    return f"upstream closed {received}"


def _seed() -> str:
    """What a connection's ids derive from: unique to it."""
    return secrets.token_hex(8)
