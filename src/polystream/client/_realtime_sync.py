"""The WebSocket client (sync): the same decisions as :mod:`._realtime`, carried out
with ``websockets``' threaded client. A connection may be read in one thread and sent
on from others.

::

    with connect_sync("openai_realtime", model="gpt-realtime") as conn:
        conn.send_text("Hello")
        for routed in conn:
            ...
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

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

__all__ = ["Connection", "connect_sync", "text_turn_sync"]

Message = str | bytes
_DIAL_ERRORS = (InvalidHandshake, InvalidURI, OSError, TimeoutError, EOFError)


class Connection:
    """A realtime connection (sync); see
    :class:`~polystream.client._realtime.AsyncConnection`, whose methods it has
    without ``await``."""

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
        self._events: Generator[Routed, None, None] | None = None
        self._opened = False
        self._lock = threading.RLock()  # the link's state, across threads
        self._closing = threading.Event()  # wakes a reconnection's wait

    # -- opening and closing ------------------------------------------------------------

    def open(self) -> Connection:
        """Open the socket; see :meth:`AsyncConnection.open`."""
        if self._opened:
            raise LocalProtocolError("the connection was opened already")
        self._opened = True
        while True:
            try:
                ws = self._dial()
                break
            except HandshakeFailed as failure:
                with self._lock:
                    delay = (
                        None
                        if failure.final
                        else self.link.connect_failed(failure.status, failure.headers)
                    )
                    if delay is None:
                        self.link.close()
                if delay is None:
                    raise failure.error from failure.__cause__
                self._closing.wait(delay)
        self._ws = ws
        self._flush(ws)
        return self

    def close(self) -> list[Routed]:
        """Close the connection: the session's closing events."""
        self._closing.set()
        with self._lock:
            events = self.link.close()
        if self._ws is not None:
            self._ws.close()
        return events

    def __enter__(self) -> Connection:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if self._events is not None:
            with contextlib.suppress(ValueError):  # (being read by another thread)
                self._events.close()

    def _dial(self) -> ClientConnection:
        try:
            # Entered as a context manager (websockets 17.1 warns otherwise); closed by
            # close() or when a reconnection replaces it.
            ws: ClientConnection = ws_connect(
                self.endpoint.url, **self.options.arguments(self.endpoint)
            ).__enter__()
        except _DIAL_ERRORS as exc:
            raise handshake_failure(exc, self.endpoint) from exc
        response = ws.response
        if response is not None:
            self.request_id = response.headers.get(self.endpoint.request_id_header)
        return ws

    # -- sending -----------------------------------------------------------------------

    def send(self, messages: Message | Iterable[Message]) -> None:
        """Send messages made by the session's commands; see
        :meth:`AsyncConnection.send`."""
        batch = [messages] if isinstance(messages, str | bytes) else list(messages)
        with self._lock:
            now = self.link.admit(batch)
            ws = self._ws
        at = 0
        while at < len(now):
            assert ws is not None
            try:
                ws.send(now[at])
            except ConnectionClosed:
                with self._lock:
                    if self._ws is not ws and self.link.state == "open":
                        ws = self._ws  # replaced while this send waited: write there
                        continue
                    self.link.unsent(now[at:])
                return
            with self._lock:
                self.link.sent(now[at])
            at += 1

    def command(self, name: str, *args: Any, **kwargs: Any) -> list[Message]:
        """Run the session's command ``name`` and send its messages; returns them."""
        run: Callable[..., Iterable[Message]] | None = getattr(self.session, name, None)
        if name.startswith("_") or run is None or not callable(run):
            raise LocalProtocolError(f"{self.session.dialect} has no command {name!r}")
        with self._lock:
            messages = list(run(*args, **kwargs))
        self.send(messages)
        return messages

    def configure(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`configure`, sent."""
        return self.command("configure", *args, **kwargs)

    def send_text(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`send_text`, sent."""
        return self.command("send_text", *args, **kwargs)

    def send_audio(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`send_audio`, sent."""
        return self.command("send_audio", *args, **kwargs)

    def append_item(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`append_item`, sent."""
        return self.command("append_item", *args, **kwargs)

    def create_response(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`create_response`, sent."""
        return self.command("create_response", *args, **kwargs)

    def cancel(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`cancel`, sent."""
        return self.command("cancel", *args, **kwargs)

    def truncate(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`truncate`, sent."""
        return self.command("truncate", *args, **kwargs)

    def tool_result(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's :meth:`tool_result`, sent."""
        return self.command("tool_result", *args, **kwargs)

    def barge_in(self, *args: Any, **kwargs: Any) -> list[Message]:
        """The session's ``barge_in``, sent."""
        return self.command("barge_in", *args, **kwargs)

    # -- reading -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Routed]:
        if self._events is None:
            if self._ws is None:
                raise LocalProtocolError("open the connection before reading it")
            self._events = self._read()
        return self._events

    def _read(self) -> Generator[Routed, None, None]:
        link = self.link
        while True:
            ws = self._ws
            assert ws is not None
            try:
                message = ws.recv(timeout=self.idle_timeout)
            except ConnectionClosed as exc:
                with self._lock:
                    drop = link.dropped(*close_of(exc))
            except TimeoutError:
                assert self.idle_timeout is not None
                with self._lock:
                    drop = link.timed_out(self.idle_timeout)
                ws.close()
            else:
                with self._lock:
                    routed = link.incoming(message)
                    renew = link.renew
                yield from routed
                if not renew:
                    continue
                ws.close()
                with self._lock:
                    drop = link.renewal()
            yield from drop.events
            cause: BaseException | None = None
            if drop.delay is not None:
                given_up = self._reconnect(drop.delay)
                if given_up is None:
                    continue
                drop, cause = given_up
                yield from drop.events
            if drop.error is not None:
                raise drop.error from cause
            return

    def _reconnect(self, delay: float) -> tuple[Drop, BaseException | None] | None:
        while True:
            if self._closing.wait(delay) or self.link.state == "closed":
                return Drop(), None
            try:
                ws = self._dial()
            except HandshakeFailed as failure:
                with self._lock:
                    retry = (
                        None
                        if failure.final
                        else self.link.connect_failed(failure.status, failure.headers)
                    )
                    if retry is None:
                        return self.link.give_up(), failure.error
                delay = retry
                continue
            with self._lock:
                closed = self.link.state == "closed"
                if not closed:
                    self._ws = ws
            if closed:
                ws.close()
                return Drop(), None
            self._flush(ws)
            return None

    def _flush(self, ws: ClientConnection) -> None:
        with self._lock:
            replay = self.link.connected()
        try:
            for replayed in replay:
                ws.send(replayed)
        except ConnectionClosed:
            return
        while True:
            with self._lock:
                message = self.link.next_queued()
            if message is None:
                return
            try:
                ws.send(message)
            except ConnectionClosed:
                with self._lock:
                    self.link.unsent([message])
                return
            with self._lock:
                self.link.sent(message)


def connect_sync(
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
) -> Connection:
    """A realtime connection of ``family`` (``with connect_sync(...) as conn``); the
    arguments are :func:`~polystream.client._realtime.connect`'s."""
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
    return Connection(link, target, options, idle_timeout=idle_timeout)


def text_turn_sync(
    family: str,
    prompt: str,
    *,
    instructions: str | None = None,
    on_event: Callable[[Routed], None] | None = None,
    seconds: float | None = None,
    **options: Any,
) -> Result:
    """:func:`~polystream.client._realtime.text_turn`, synchronously."""
    with connect_sync(family, **options) as conn:
        config = dict(conn.link.spec.text_config)
        if instructions is not None:
            config["instructions"] = instructions
        if config:
            conn.configure(**config)
        conn.send_text(prompt)
        turn = Turn(conn.session.dialect)
        for routed in conn:
            if on_event is not None:
                on_event(routed)
            if turn.feed(routed):
                break
            if seconds is not None and turn.audio_seconds >= seconds:
                conn.cancel()
                for closing in conn.close():
                    if on_event is not None:
                        on_event(closing)
                    turn.feed(closing)
                break
        if not turn.answered:
            raise TransportError("the connection ended before a reply began")
        return turn.result()
