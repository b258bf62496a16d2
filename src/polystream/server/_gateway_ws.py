"""The gateway's WebSocket relay: each WebSocket family passed through to an upstream of
the same family (the ASGI ``websocket`` scope).

What to decide is decided in :mod:`polystream.gateway_core` (the paths, where the key
and the model are, the upstream's URL, the refusals, the in-band errors, what is
scrubbed, the close codes); here, one connection's bytes are moved:

1. The handshake: the path names the family; the client's key is checked (a missing
   or wrong one is refused with 401, before any upstream is asked); the model comes
   from the URL's query (``?model=``), and the upstream is connected before the
   client's handshake is answered, so that an upstream that refuses it (or cannot be
   reached) refuses the client with its status. A family whose model is in a client
   message (the Responses WebSocket's ``response.create``) is accepted first, and its
   upstream connected when that message has come.
2. The relay: each message is passed on as it came (a text as text, bytes as bytes, in
   order), an upstream's error text scrubbed of secrets. Each direction holds at most
   one message of its own: the next is read only once the last was written (the
   sockets' own buffers are bounded), so a side that does not read holds the other
   back rather than growing a queue.
3. The close: a close on either side closes the other with the same code and reason
   (but the codes no close frame carries, see
   :func:`~polystream.gateway_core.relayed_close_code`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import parse_qsl

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from polystream import __version__
from polystream.dialects._sockets import SOCKET_SPECS
from polystream.events import Finish
from polystream.gateway_core import (
    SOCKET_PATHS,
    Upstream,
    message_model,
    model_name,
    relayed_close_code,
    scrub,
    scrub_socket_message,
    socket_denial,
    socket_error,
    socket_key,
    socket_model,
    socket_refusal,
    upstream_socket_url,
    with_model,
)
from polystream.realtime import RealtimeSession, Routed, open_session
from polystream.server._gateway_bridge import BridgedConnection, run_bridged

if TYPE_CHECKING:
    from polystream.gateway_core import GatewayConfig, Limits, Tenants
    from polystream.scrub import Scrubber

__all__ = ["MAX_MESSAGE_BYTES", "UPSTREAM_QUEUE", "SocketRelays"]

logger = logging.getLogger("polystream.gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest message taken from an upstream (a larger one closes it with 1009), as
the sessions' bound and the servers' own for a client's message."""

UPSTREAM_QUEUE: Final = 4
"""Upstream messages read ahead of the client (the upstream's socket is then read no
more until the client has taken some)."""

_OPEN_TIMEOUT: Final = 10.0
"""Seconds an upstream's handshake may take."""

_CLOSE_TIMEOUT: Final = 5.0
"""Seconds the other side's closing handshake is waited for."""


class _Connect(connect):
    """The ``websockets`` client's connection, following no redirect: a redirect means
    nothing to the gateway's client (the upstream's URL is not its business), and the
    upstream's key is not to go anywhere but the configured upstream."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class _Refused(Exception):
    """A connection the gateway does not relay: its status and message."""

    def __init__(self, status: int, message: str, *, kind: str, retry_after: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.retry_after = retry_after


def _close_code_for(status: int) -> int:
    """The close code of an accepted connection that the gateway ends for a failure of
    ``status``: try again later (1013) for a rate limit or an overload, an internal
    error (1011) for any other server error, a policy violation (1008) otherwise."""
    if status in (429, 503, 529):
        return 1013
    return 1011 if status >= 500 else 1008


def _fit_reason(reason: str) -> str:
    """A close reason within a close frame's 123 bytes (cut at a character)."""
    data = reason.encode()
    if len(data) <= 123:
        return reason
    return data[:123].decode(errors="ignore")


class SocketRelays:
    """The gateway's WebSocket connections.

    Args:
        config: The gateway's configuration (upstreams, routes).
        tenants: The client keys it accepts.
        secrets: What is scrubbed from every text a client or the log sees.
        limits: Its limits (``max_concurrency`` counts each connection,
            ``slow_client_seconds`` bounds a write to a client).
        slots: Takes a concurrency slot (False: none is free) and gives it back:
            ``slots(+1)`` / ``slots(-1)``.
        log_usage: Feed the family's session the relayed messages (after each is
            sent), for a log line per reply with its usage.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        tenants: Tenants,
        secrets: Scrubber,
        limits: Limits,
        slots: Callable[[int], bool],
        log_usage: bool = False,
    ) -> None:
        self.config = config
        self.log_usage = log_usage
        self.tenants = tenants
        self.secrets = secrets
        self.limits = limits
        self.slots = slots
        self.user_agent = f"polystream-gateway/{__version__}"

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one WebSocket connection (the app's ``websocket`` scope)."""
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        started = time.perf_counter()
        path = scope["path"]
        family = SOCKET_PATHS.get(path)
        relay = _Relay(self, scope, receive, send, family)
        try:
            if family is None:
                raise _Refused(404, f"no such WebSocket endpoint: {path}", kind="not_found")
            await relay.run(family)
        except _Refused as refused:
            await relay.refuse(refused)
        except Exception as exc:  # never a traceback to the client
            logger.error(
                "gateway error on WebSocket %s: %s",
                path,
                scrub(f"{type(exc).__name__}: {exc}", self.secrets),
            )
            await relay.fail()
        finally:
            tally = relay.tally
            usage = ""
            if tally is not None:
                tally.close()
                usage = (
                    f"; replies: {tally.replies}, usage: input {tally.input_tokens}, "
                    f"output {tally.output_tokens}"
                )
            logger.info(
                "WebSocket %s -> %s in %.1f ms (%d messages in, %d out%s)",
                path,
                relay.outcome,
                (time.perf_counter() - started) * 1000,
                relay.inbound,
                relay.outbound,
                usage,
            )


class _Relay:
    """One client connection and its upstream."""

    def __init__(
        self, relays: SocketRelays, scope: Scope, receive: Receive, send: Send, family: str | None
    ) -> None:
        self.relays = relays
        self.scope = scope
        self.receive = receive
        self.send = send
        self.family = family
        self.accepted = False
        self.closed = False  # the client's close is sent (or the client is gone)
        self.upstream: ClientConnection | None = None
        self.outcome = "-"
        self.inbound = 0  # client messages relayed
        self.outbound = 0  # upstream messages relayed
        self.subprotocol: str | None = None
        self.sending = False  # a write to the client is waiting
        self.tally: _Tally | None = None

    # -- the handshake ---------------------------------------------------------------

    async def run(self, family: str) -> None:
        relays = self.relays
        spec = SOCKET_SPECS[family]
        scope = self.scope
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", ())
        }
        raw_query = scope.get("query_string", b"")
        query = dict(parse_qsl(raw_query.decode("latin-1"))) if raw_query else {}
        key, self.subprotocol = socket_key(family, headers, query, scope.get("subprotocols") or ())
        if relays.tenants.identify(key) is None:
            raise _Refused(401, "missing or invalid API key", kind="authentication")
        if not relays.slots(+1):
            raise _Refused(
                503,
                "the gateway is at its concurrency limit",
                kind="overloaded",
                retry_after=True,
            )
        try:
            # (A key the client put in the query is the gateway's, never the upstream's.)
            upstream_query = {k: v for k, v in query.items() if f"?{k}" not in spec.auth.accepts}
            model = socket_model(family, query)
            first: str | None = None
            if relays.log_usage:
                self.tally = _Tally(family, scope["path"])
            if model is not None:
                upstream, sent_model = self._route(family, model)
                if upstream.dialect != family:
                    # (Translated: the client's query is its family's, not the upstream's;
                    # a family whose URL names no model has it in its setup.)
                    in_url = "model" in SOCKET_SPECS[upstream.dialect].query
                    upstream_query = {"model": sent_model} if in_url else {}
                    if self.tally is not None:
                        self.tally = _Tally(upstream.dialect, scope["path"])
                elif model:
                    upstream_query["model"] = sent_model
                await self._connect(upstream, upstream.dialect, upstream_query)
                try:
                    await self._accept()
                except OSError:  # (the client went while its upstream was asked)
                    self.closed = True
                    self.outcome = "client gone before the handshake's answer"
                    assert self.upstream is not None
                    await _close_upstream(self.upstream, 1001)
                    return
                if upstream.dialect != family:
                    await self._bridged(upstream, family, model, sent_model)
                    return
            else:
                await self._accept()
                incoming = await self.receive()
                if incoming["type"] != "websocket.receive":
                    self.closed = True
                    self.outcome = "client gone before its first message"
                    return
                first_text: str | None = incoming.get("text")
                if first_text is None and incoming.get("bytes"):  # (JSON in a binary frame)
                    with contextlib.suppress(UnicodeDecodeError):
                        first_text = incoming["bytes"].decode()
                named = message_model(family, first_text) if first_text is not None else None
                model = named[1] if named is not None else ""
                try:
                    upstream, sent_model = self._route(family, model)
                    if upstream.dialect != family:
                        in_url = "model" in SOCKET_SPECS[upstream.dialect].query
                        upstream_query = {"model": sent_model} if in_url else {}
                    await self._connect(upstream, upstream.dialect, upstream_query)
                except _Refused as refused:
                    await self._error_and_close(refused)
                    return
                if upstream.dialect != family:
                    assert first_text is not None
                    await self._bridged(upstream, family, model, sent_model, first=first_text)
                    return
                if named is not None and sent_model != model:
                    first = with_model(named[0], named[2], model_name(family, sent_model))
                else:
                    first = first_text
                first_message: str | bytes = first if first is not None else incoming["bytes"]
                assert self.upstream is not None
                await self.upstream.send(first_message)
                self.inbound += 1
                if self.tally is not None and isinstance(first_message, str):
                    self.tally.client(first_message)
            await self._relay(upstream)
        finally:
            relays.slots(-1)

    def _route(self, family: str, model: str) -> tuple[Upstream, str]:
        routed = self.relays.config.route_socket(family, model)
        if routed is None:
            raise _Refused(404, f"no upstream serves model {model!r}", kind="not_found")
        upstream, sent_model = routed
        refusal = socket_refusal(family, upstream.dialect, upstream.name)
        if refusal is not None:
            raise _Refused(400, refusal, kind="invalid_request")
        return upstream, sent_model

    async def _connect(self, upstream: Upstream, family: str, query: dict[str, str]) -> None:
        """Open the upstream's socket with the upstream's key (never the client's)."""
        spec = SOCKET_SPECS[family]
        url = upstream_socket_url(family, upstream.base_url, query)
        key = upstream.key()
        headers = spec.auth.headers(key) if key else {}
        relays = self.relays
        try:
            self.upstream = await _Connect(
                url,
                additional_headers=headers,
                user_agent_header=relays.user_agent,
                compression=None,
                max_size=MAX_MESSAGE_BYTES,
                max_queue=UPSTREAM_QUEUE,
                open_timeout=_OPEN_TIMEOUT,
                close_timeout=_CLOSE_TIMEOUT,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            text = (exc.response.body or b"").decode("utf-8", "replace")[:2000]
            body = scrub(text, relays.secrets)
            if 300 <= status < 400:
                raise _Refused(
                    502,
                    f"the upstream answered HTTP {status} (a redirect) to the WebSocket "
                    "handshake, which the gateway does not follow",
                    kind="server",
                ) from None
            if status < 400:
                status = 502
            raise _Refused(
                status,
                f"upstream: the WebSocket handshake was refused with HTTP "
                f"{exc.response.status_code}: {body}".rstrip(": "),
                kind="server" if status >= 500 else "invalid_request",
                retry_after=status in (429, 503),
            ) from None
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as exc:
            raise _Refused(
                502,
                scrub(f"upstream {upstream.name} cannot be reached: {exc}", relays.secrets),
                kind="server",
            ) from None

    async def _accept(self) -> None:
        message: dict[str, Any] = {"type": "websocket.accept"}
        if self.subprotocol is not None:
            message["subprotocol"] = self.subprotocol
        await self.send(message)
        self.accepted = True

    async def refuse(self, refused: _Refused) -> None:
        """Refuse the handshake with an HTTP error (before it is accepted), else end the
        connection with an in-band error."""
        self.outcome = f"{refused.status} ({refused.kind})"
        if self.upstream is not None:
            await _close_upstream(self.upstream, 1011)
        if self.accepted:
            await self._error_and_close(refused)
            return
        message = scrub(refused.message, self.relays.secrets)
        if "websocket.http.response" not in (self.scope.get("extensions") or {}):
            await self.send({"type": "websocket.close", "code": 1008})  # (the server's 403)
            return
        body = socket_denial(self.scope["path"], refused.status, message, kind=refused.kind)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if refused.retry_after:
            headers.append((b"retry-after", b"1"))
        await self.send(
            {"type": "websocket.http.response.start", "status": refused.status, "headers": headers}
        )
        await self.send({"type": "websocket.http.response.body", "body": body})

    async def _error_and_close(self, refused: _Refused) -> None:
        """End an accepted connection: the family's ``error`` message, then a close."""
        assert self.family is not None
        message = scrub(refused.message, self.relays.secrets)
        self.outcome = f"{refused.status} ({refused.kind}) in-band"
        with contextlib.suppress(Exception):
            await self.send(
                {
                    "type": "websocket.send",
                    "text": socket_error(self.family, refused.status, message, kind=refused.kind),
                }
            )
            await self._close_client(_close_code_for(refused.status), message)

    async def fail(self) -> None:
        """The gateway failed: close both sides (1011), or refuse with a 500."""
        if self.upstream is not None:
            with contextlib.suppress(Exception):
                await _close_upstream(self.upstream, 1011)
        with contextlib.suppress(Exception):
            if self.accepted:
                await self._close_client(1011, "internal gateway error")
            elif not self.closed:
                await self.refuse(_Refused(500, "internal gateway error", kind="server"))
        self.outcome = "500 (gateway error)"

    async def _close_client(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            await self.send(
                {"type": "websocket.close", "code": code, "reason": _fit_reason(reason)}
            )

    # -- a translated connection ------------------------------------------------------

    async def _bridged(
        self,
        upstream_config: Upstream,
        family: str,
        model: str,
        sent_model: str,
        *,
        first: str | None = None,
    ) -> None:
        upstream = self.upstream
        assert upstream is not None
        tally = self.tally
        self.outcome = f"{upstream_config.name} ({upstream_config.dialect}, translated)"
        connection = BridgedConnection(
            family,
            upstream_config.dialect,
            model=model,
            upstream_model=sent_model,
            receive=self.receive,
            send=self.send,
            upstream=upstream,
            secrets=self.relays.secrets,
            on_upstream=tally.server if tally is not None else _ignore,
        )

        async def close_client(code: int, reason: str) -> None:
            await self._close_client(code, reason)

        async def close_upstream(code: int) -> None:
            await _close_upstream(upstream, code)

        seconds = self.relays.limits.slow_client_seconds
        try:
            ended = await run_bridged(
                connection,
                close_client=close_client,
                close_upstream=close_upstream,
                watch=lambda state, task: _Watchdog(state, task, seconds),
                first=first,
            )
        finally:
            self.inbound = connection.inbound
            self.outbound = connection.outbound
            if connection.client_gone:
                self.closed = True
        self.outcome += f", {ended}"

    # -- the relay -------------------------------------------------------------------

    async def _relay(self, upstream_config: Upstream) -> None:
        upstream = self.upstream
        assert upstream is not None
        self.outcome = f"{upstream_config.name} ({upstream_config.dialect})"
        down = asyncio.create_task(self._downstream(upstream))
        up = asyncio.create_task(self._upstream_bound(upstream, upstream_config))
        watchdog = _Watchdog(self, down, self.relays.limits.slow_client_seconds)
        try:
            done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            down.cancel()
            up.cancel()
            await _close_upstream(upstream, 1001)
            raise
        finally:
            watchdog.stop()
        ended = up.result() if up in done else None
        if ended is not None:
            # The client closed or went: its upstream goes too.
            code, reason = ended
            self.closed = True
            await upstream.close(relayed_close_code(code, upstream=False), reason)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(down, _CLOSE_TIMEOUT)
            self.outcome += f", client closed {code}"
            return
        if not down.done():
            # (A send to the upstream found it closed: its reading ends with its close.)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(down), _CLOSE_TIMEOUT)
            if not down.done():
                down.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await down
        up.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await up
        if down.cancelled():  # (the watchdog's: a client that takes no writes)
            self.outcome += ", client too slow"
            self.closed = True
            await _close_upstream(upstream, 1001)
            return
        failure = down.exception()
        if failure is not None:
            await _close_upstream(upstream, 1011)
            raise failure
        if self.closed:
            return  # (the client is gone)
        # The upstream closed: so does its client, with the same code.
        received = upstream.close_code
        code = relayed_close_code(received, upstream=True)
        reason = scrub(upstream.close_reason or "", self.relays.secrets)
        if received in (None, 1006, 1015):
            reason = reason or "upstream connection lost"
        await self._close_client(code, reason)
        self.outcome += f", upstream closed {received}"

    async def _downstream(self, upstream: ClientConnection) -> None:
        """Upstream to client, message by message, until the upstream closes."""
        send = self.send
        secrets = self.relays.secrets
        tally = self.tally
        try:
            async for message in upstream:
                if type(message) is str:
                    out: Message = {
                        "type": "websocket.send",
                        "text": scrub_socket_message(message, secrets),
                    }
                else:
                    out = {"type": "websocket.send", "bytes": message}
                self.sending = True
                await send(out)
                self.sending = False
                self.outbound += 1
                if tally is not None:
                    tally.server(message)  # (once the message is on its way)
            return  # (the upstream closed: its close code says how)
        except ConnectionClosed:
            return  # (an upstream lost without a close: its close code says so)
        except OSError:  # (the server's "client disconnected")
            self.outcome += ", client gone"
        self.closed = True
        with contextlib.suppress(Exception):
            await _close_upstream(upstream, 1001)

    async def _upstream_bound(
        self, upstream: ClientConnection, upstream_config: Upstream
    ) -> tuple[int | None, str] | None:
        """Client to upstream, message by message; returns the client's close code and
        reason when it closes or goes, None when the upstream is found closed."""
        try:
            return await self._client_messages(upstream, upstream_config)
        except ConnectionClosed:
            return None

    async def _client_messages(
        self, upstream: ClientConnection, upstream_config: Upstream
    ) -> tuple[int | None, str]:
        receive = self.receive
        family = self.family
        assert family is not None
        checks = bool(SOCKET_SPECS[family].model_messages)
        tally = self.tally
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                text = message.get("text")
                if text is not None:
                    if checks:
                        checked = await self._checked(text, family, upstream_config)
                        if checked is None:
                            continue
                        text = checked
                    await upstream.send(text)
                    if tally is not None:
                        tally.client(text)
                else:
                    await upstream.send(message["bytes"])
                self.inbound += 1
            elif kind == "websocket.disconnect":
                return message.get("code"), message.get("reason") or ""

    async def _checked(self, text: str, family: str, upstream: Upstream) -> str | None:
        """A client message as it goes upstream: one that names a model has it
        rewritten as the routes say; one whose model another upstream serves is
        refused in-band (None: not sent)."""
        named = message_model(family, text)
        if named is None:
            return text
        message, model, path = named
        routed = self.relays.config.route_socket(family, model)
        if routed is not None and routed[0] is upstream:
            sent = routed[1]
            return text if sent == model else with_model(message, path, model_name(family, sent))
        error = socket_error(
            family,
            400,
            f"model {model!r} is not served by this connection's upstream "
            f"({upstream.name}): open another connection for it",
            kind="invalid_request",
            param="model",
        )
        await self.send({"type": "websocket.send", "text": error})
        return None


class _Sending(Protocol):
    """What a watchdog watches: whether a write to the client waits, and how many
    were made."""

    sending: bool
    outbound: int


def _ignore(message: str | bytes) -> None:
    pass


class _Watchdog:
    """Ends a relay whose client takes no writes: a write to the client that is still
    waiting after ``seconds`` (checked every ``seconds``: a stalled write is cut after
    one to two periods) cancels the relay's upstream-to-client task. One timer per
    connection, not one per message."""

    def __init__(self, relay: _Sending, task: asyncio.Task[None], seconds: float) -> None:
        self.relay = relay
        self.task = task
        self.seconds = seconds
        self.seen = -1  # the messages sent at the last check
        self.handle = asyncio.get_running_loop().call_later(seconds, self.check)

    def check(self) -> None:
        relay = self.relay
        if relay.sending and relay.outbound == self.seen:
            self.task.cancel()
            return
        self.seen = relay.outbound
        self.handle = asyncio.get_running_loop().call_later(self.seconds, self.check)

    def stop(self) -> None:
        self.handle.cancel()


class _Tally:
    """The family's session, fed the relayed messages after they are sent: a log line
    for each reply that ends (its id, status and usage), and the connection's totals.
    A session that fails is dropped (the relay goes on)."""

    def __init__(self, family: str, path: str) -> None:
        self.session: RealtimeSession | None = open_session(family)
        self.path = path
        self.replies = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.tells = hasattr(self.session, "sent")  # (the Responses WebSocket's requests)

    def client(self, message: str) -> None:
        session = self.session
        if session is not None and self.tells:
            try:
                session.sent(message)  # type: ignore[attr-defined]
            except Exception as exc:
                self._drop(exc)

    def server(self, message: str | bytes) -> None:
        session = self.session
        if session is None:
            return
        try:
            routed = session.feed(message)
        except Exception as exc:
            self._drop(exc)
            return
        for item in routed:
            if type(item.event) is Finish:
                self._finished(item)

    def close(self) -> None:
        session = self.session
        if session is not None:
            self.session = None
            with contextlib.suppress(Exception):
                for item in session.close():
                    if type(item.event) is Finish:
                        self._finished(item)

    def _finished(self, item: Routed) -> None:
        finish = item.event
        assert isinstance(finish, Finish)
        usage = finish.usage
        self.replies += 1
        if usage is not None:
            self.input_tokens += usage.input_tokens or 0
            self.output_tokens += usage.output_tokens or 0
        logger.info(
            "WebSocket %s: reply %s %s, usage: input %s, output %s, total %s",
            self.path,
            item.response_id or item.stream,
            finish.status,
            usage.input_tokens if usage is not None else "-",
            usage.output_tokens if usage is not None else "-",
            usage.total_tokens if usage is not None else "-",
        )

    def _drop(self, exc: Exception) -> None:
        logger.warning(
            "WebSocket %s: its session could not read the relayed messages, usage is not "
            "logged: %s",
            self.path,
            type(exc).__name__,
        )
        self.session = None


async def _close_upstream(upstream: ClientConnection, code: int, reason: str = "") -> None:
    """Close an upstream whose messages are no longer relayed: what it still sends is
    read and dropped meanwhile (its reading may be paused on a full queue, and its
    answer to the close must be read), for at most the close timeout."""

    async def drain() -> None:
        with contextlib.suppress(ConnectionClosed):
            async for _ in upstream:
                pass

    draining = asyncio.get_running_loop().create_task(drain())
    try:
        await upstream.close(code, reason)
    finally:
        draining.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await draining
