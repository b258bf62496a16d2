"""The WebSocket client (async): carries out a :class:`~polystream.realtime._link.SocketLink`'s
decisions over ``websockets``. No protocol logic lives here.

::

    async with connect("openai_realtime", model="gpt-realtime") as conn:
        await conn.configure(instructions="Be brief.", output_modalities=["text"])
        await conn.send_text("Hello")
        async for routed in conn:
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from polystream.accumulate import Result
from polystream.client._ws import (
    HandshakeFailed,
    SocketOptions,
    close_of,
    handshake_failure,
    prepare,
)
from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.errors import LocalProtocolError, TransportError
from polystream.realtime._endpoint import Endpoint
from polystream.realtime._link import DEFAULT_RECONNECT, Drop, SocketLink
from polystream.realtime._turn import Turn
from polystream.retry import RetryPolicy

__all__ = ["AsyncConnection", "connect", "text_turn"]

Message = str | bytes
_DIAL_ERRORS = (InvalidHandshake, InvalidURI, OSError, TimeoutError, EOFError)


class AsyncConnection:
    """A realtime connection (async): a family's session over a WebSocket that is
    reconnected where the family allows it.

    Made by :func:`connect`; opened by ``async with`` (or :meth:`open`), closed on
    leaving it (or :meth:`close`). Send with the session's commands
    (:meth:`send_text`, :meth:`configure`, ...; :meth:`command` for a family's own);
    ``async for routed in conn`` gives the session's
    :class:`~polystream.realtime.Routed` events until the connection ends.

    Attributes:
        session: The family's sans-I/O session (its state: ``active_responses``,
            ``last_response_id(lane)``, ...).
        link: The decisions (``state``, ``queued``, ``connections``).
        endpoint: The URL and headers of the handshake.
        request_id: The provider's request id of the last handshake, when sent.
    """

    def __init__(
        self,
        link: SocketLink,
        endpoint: Endpoint,
        options: SocketOptions,
        *,
        idle_timeout: float | None = None,
    ) -> None:
        self.link = link
        self.session: RealtimeSession = link.session
        self.endpoint = endpoint
        self.options = options
        self.idle_timeout = idle_timeout
        self.request_id: str | None = None
        self._ws: ClientConnection | None = None
        self._events: AsyncGenerator[Routed, None] | None = None
        self._opened = False

    # -- opening and closing ------------------------------------------------------------

    async def open(self) -> AsyncConnection:
        """Open the socket (retried as the reconnections are, for a network failure or
        a retryable status) and send what was queued.

        Raises:
            APIStatusError: The handshake was refused (401: ``kind`` is
                ``authentication``), and no retry is left or allowed.
            TransportError: The socket could not be opened.
        """
        if self._opened:
            raise LocalProtocolError("the connection was opened already")
        self._opened = True
        while True:
            try:
                ws = await self._dial()
                break
            except HandshakeFailed as failure:
                delay = (
                    None
                    if failure.final
                    else self.link.connect_failed(failure.status, failure.headers)
                )
                if delay is None:
                    self.link.close()
                    raise failure.error from failure.__cause__
                await asyncio.sleep(delay)
        self._ws = ws
        await self._flush(ws)
        return self

    async def close(self) -> list[Routed]:
        """Close the connection: the session's closing events (every reply still open
        ends ``truncated``). Messages still queued are dropped."""
        events = self.link.close()
        if self._ws is not None:
            await self._ws.close()
        return events

    async def __aenter__(self) -> AsyncConnection:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if self._events is not None:
            with contextlib.suppress(RuntimeError):  # (being read by another task)
                await self._events.aclose()

    async def _dial(self) -> ClientConnection:
        try:
            ws = await ws_connect(self.endpoint.url, **self.options.arguments(self.endpoint))
        except _DIAL_ERRORS as exc:
            raise handshake_failure(exc, self.endpoint) from exc
        response = ws.response
        if response is not None:
            self.request_id = response.headers.get(self.endpoint.request_id_header)
        return ws

    # -- sending -----------------------------------------------------------------------

    async def send(self, messages: Message | Iterable[Message]) -> None:
        """Send messages made by the session's commands (one, or a list), in order:
        at once when the socket is up, else when one is (they are queued while the
        connection reconnects).

        Raises:
            LocalProtocolError: The connection is over.
        """
        batch = [messages] if isinstance(messages, str | bytes) else list(messages)
        now = self.link.admit(batch)
        ws = self._ws
        at = 0
        while at < len(now):
            assert ws is not None
            try:
                await ws.send(now[at])
            except ConnectionClosed:
                if self._ws is not ws and self.link.state == "open":
                    ws = self._ws  # replaced while this send waited: write there
                    continue
                self.link.unsent(now[at:])
                return
            self.link.sent(now[at])
            at += 1

    async def command(self, name: str, *args: Any, **kwargs: Any) -> list[Message]:
        """Run the session's command ``name`` (``warm_up``, ``steer``,
        ``commit_audio``, ...) and send its messages; returns them.

        Raises:
            LocalProtocolError: The family has no such command.
        """
        run: Callable[..., Iterable[Message]] | None = getattr(self.session, name, None)
        if name.startswith("_") or run is None or not callable(run):
            raise LocalProtocolError(f"{self.session.dialect} has no command {name!r}")
        messages = list(run(*args, **kwargs))
        await self.send(messages)
        return messages

    async def configure(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`configure`, sent."""
        return await self.command("configure", *args, **kwargs)

    async def send_text(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`send_text`, sent."""
        return await self.command("send_text", *args, **kwargs)

    async def send_audio(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`send_audio`, sent."""
        return await self.command("send_audio", *args, **kwargs)

    async def append_item(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`append_item`, sent."""
        return await self.command("append_item", *args, **kwargs)

    async def create_response(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`create_response`, sent."""
        return await self.command("create_response", *args, **kwargs)

    async def cancel(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`cancel`, sent."""
        return await self.command("cancel", *args, **kwargs)

    async def truncate(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`truncate`, sent."""
        return await self.command("truncate", *args, **kwargs)

    async def tool_result(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`tool_result`, sent."""
        return await self.command("tool_result", *args, **kwargs)

    async def barge_in(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's ``barge_in`` (the Realtime API: truncate what was played,
        cancel the reply), sent."""
        return await self.command("barge_in", *args, **kwargs)

    # -- reading -----------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Routed]:
        if self._events is None:
            if self._ws is None:
                raise LocalProtocolError("open the connection before reading it")
            self._events = self._read()
        return self._events

    async def _read(self) -> AsyncGenerator[Routed, None]:
        link = self.link
        while True:
            ws = self._ws
            assert ws is not None
            try:
                if self.idle_timeout is None:
                    message = await ws.recv()
                else:
                    message = await asyncio.wait_for(ws.recv(), self.idle_timeout)
            except ConnectionClosed as exc:
                drop = link.dropped(*close_of(exc))
            except TimeoutError:
                assert self.idle_timeout is not None
                drop = link.timed_out(self.idle_timeout)
                await ws.close()
            else:
                for routed in link.incoming(message):
                    yield routed
                if not link.renew:
                    continue
                await ws.close()
                drop = link.renewal()
            for routed in drop.events:
                yield routed
            cause: BaseException | None = None
            if drop.delay is not None:
                given_up = await self._reconnect(drop.delay)
                if given_up is None:
                    continue
                drop, cause = given_up
                for routed in drop.events:
                    yield routed
            if drop.error is not None:
                raise drop.error from cause
            return

    async def _reconnect(self, delay: float) -> tuple[Drop, BaseException | None] | None:
        """Reconnect (None), or give up: the end and the last attempt's error."""
        while True:
            await asyncio.sleep(delay)
            if self.link.state == "closed":
                return Drop(), None
            try:
                ws = await self._dial()
            except HandshakeFailed as failure:
                retry = (
                    None
                    if failure.final
                    else self.link.connect_failed(failure.status, failure.headers)
                )
                if retry is None:
                    return self.link.give_up(), failure.error
                delay = retry
                continue
            if self.link.state == "closed":
                await ws.close()
                return Drop(), None
            self._ws = ws
            await self._flush(ws)
            return None

    async def _flush(self, ws: ClientConnection) -> None:
        """A socket opened: the replay, then the queue (a failure is read as the
        socket's end by the next read)."""
        try:
            for replayed in self.link.connected():
                await ws.send(replayed)
        except ConnectionClosed:
            return
        while (message := self.link.next_queued()) is not None:
            try:
                await ws.send(message)
            except ConnectionClosed:
                self.link.unsent([message])
                return
            self.link.sent(message)


def connect(
    family: str,
    *,
    model: str | None = None,
    api_key: str | Mapping[str, str] | None = None,
    base_url: str | Mapping[str, str] | None = None,
    url: str | None = None,
    query: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    reconnect: RetryPolicy | None = DEFAULT_RECONNECT,
    replay: bool = True,
    full_history_retry: bool = False,
    ping_interval: float | None = 20.0,
    ping_timeout: float | None = 20.0,
    connect_timeout: float | None = 10.0,
    close_timeout: float | None = 10.0,
    idle_timeout: float | None = None,
    keep_raw: bool = False,
    strict: bool = False,
    session_options: Mapping[str, Any] | None = None,
    websocket_options: Mapping[str, Any] | None = None,
) -> AsyncConnection:
    """A realtime connection of ``family`` (``async with connect(...) as conn``).

    Args:
        family: A WebSocket family (:data:`polystream.realtime.SOCKETS`).
        model: The model (``?model=`` for the Realtime API; the requests' ``model``
            for the Responses WebSocket).
        api_key: A key, or keys by provider; default: the provider's environment
            variable (``OPENAI_API_KEY``).
        base_url: The provider's base URL (or URLs by provider), as for the HTTP
            client: the emulator's ``http://HOST:PORT/openai/v1``.
        url: The whole endpoint instead.
        query: More query parameters (``call_id``).
        headers: More handshake headers.
        reconnect: Reconnection after a close code the family allows (and retries of
            the first handshake); None: never.
        replay: Replay the recorded conversation on a new socket (Realtime API).
        full_history_retry: Act on a safe retry advice (Responses WebSocket): send the
            failed request again, with its full history, on a new connection.
        ping_interval, ping_timeout: Keep-alive pings (seconds; None: none).
        connect_timeout: Seconds for a handshake.
        close_timeout: Seconds to wait for the peer's part of a closing handshake
            (after a keep-alive timeout: before reconnecting).
        idle_timeout: Seconds without a server message before the connection ends with
            :class:`~polystream.errors.IdleTimeout` (None: no limit).
        keep_raw: Also give the session's ``Raw`` events.
        strict: A strict session (a malformed message raises).
        session_options: More options of the session (``max_message_size``, ...).
        websocket_options: More options of ``websockets``' ``connect``.

    Raises:
        LocalProtocolError: An unknown family, or no API key.
    """
    link, target, options = prepare(
        family,
        model=model,
        api_key=api_key,
        base_url=base_url,
        url=url,
        query=query,
        headers=headers,
        reconnect=reconnect,
        replay=replay,
        full_history_retry=full_history_retry,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        connect_timeout=connect_timeout,
        close_timeout=close_timeout,
        keep_raw=keep_raw,
        strict=strict,
        session_options=session_options,
        websocket_options=websocket_options,
    )
    return AsyncConnection(link, target, options, idle_timeout=idle_timeout)


async def text_turn(
    family: str,
    prompt: str,
    *,
    instructions: str | None = None,
    on_event: Callable[[Routed], None] | None = None,
    seconds: float | None = None,
    **options: Any,
) -> Result:
    """One text turn on a new connection: configure text replies (and
    ``instructions``), send ``prompt``, read the reply; returns it (``.text``,
    ``.status``, ``.usage``). A server ``error`` that answers the request before any
    reply began (a refused ``response.create``) ends the turn at once: the result is
    ``failed``, with that error.

    Args:
        family: A WebSocket family.
        prompt: The user's text.
        instructions: The system instructions.
        on_event: Called with every routed event as it arrives (to print the text).
        seconds: End the reply once this many seconds of its audio arrived (a reply
            without end: music): the family's :meth:`cancel` is sent and the
            connection closed; the reply ends as the session ends it then.
        **options: As :func:`connect` (``model``, ``api_key``, ``base_url``, ...).

    Raises:
        TransportError: The connection ended before the reply did (or as
            :func:`connect` and :meth:`AsyncConnection.open`).
    """
    async with connect(family, **options) as conn:
        config = dict(conn.link.spec.text_config)
        if instructions is not None:
            config["instructions"] = instructions
        if config:
            await conn.configure(**config)
        await conn.send_text(prompt)
        turn = Turn(conn.session.dialect)
        async for routed in conn:
            if on_event is not None:
                on_event(routed)
            if turn.feed(routed):
                break
            if seconds is not None and turn.audio_seconds >= seconds:
                await conn.cancel()
                for closing in await conn.close():
                    if on_event is not None:
                        on_event(closing)
                    turn.feed(closing)
                break
        if not turn.answered:
            raise TransportError("the connection ended before a reply began")
        return turn.result()
