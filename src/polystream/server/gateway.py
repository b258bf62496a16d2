"""The gateway: a client speaks any inbound dialect, the gateway calls the configured
upstream in the upstream's own dialect and transcodes the reply back, event by event.

This module only moves bytes: routing, authentication, request translation, retries,
resume decisions, transcoding and journal cursors all live in the sans-I/O core
(:mod:`polystream.gateway_core`, :mod:`polystream.request`, :mod:`polystream.call`, the
dialect encoders, :mod:`polystream.journal`). Here: a request's handling; a stream's
pump is :mod:`polystream.server._gateway_stream`'s, a resume
:mod:`polystream.server._gateway_resume`'s.

Paths are the emulator's: ``/openai/v1/...``, ``/xai/v1/...``, ``/anthropic/v1/...``,
``/gemini/v1beta/...``. Resume:

* OpenAI Responses: ``GET /openai/v1/responses/{id}?stream=true&starting_after=N``;
* Gemini Interactions: ``GET /gemini/v1beta/interactions/{id}?stream=true&last_event_id=E``;
* every other SSE dialect: send the same request again with ``Last-Event-ID`` (the
  gateway writes ``id: <stream>.<n>`` on each event).

The WebSocket families (``/openai/v1/realtime``, ``/openai/v1/responses`` as a
WebSocket, the xAI ones) are relayed to an upstream of the same family, message for
message (:mod:`polystream.server._gateway_ws`).

The media and agent-session dialects are served only by an upstream of their own
dialect (:func:`polystream.gateway_core.family_refusal`; any other pair is a 400): their
streams are passed through (decoded and written again, which gives the upstream's bytes
back), a multipart upload is forwarded byte for byte, a raw speech reply streams its
audio as it comes with the upstream's ``Content-Type``, and a request that asks for no
stream is relayed as it is (:mod:`polystream.server._gateway_media`).

Each stream is journalled under an id the gateway mints (``x-polystream-stream-id``, 128
random bits), bound to the tenant whose key created it and to the client's dialect; a
native id (a response's or interaction's own) leads to it through an alias of that
tenant and dialect. A resume by any other tenant, or through another dialect, is the
404 of an unknown id.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl

import httpx
import msgspec

from polystream import __version__
from polystream.call import StreamCall
from polystream.client import AsyncEventStream
from polystream.client._h1 import AsyncH1Transport, DirectClient
from polystream.dialects import (
    DIALECTS,
    TEXT_FAMILIES,
    get_dialect,
    match_route,
    provider_of_path,
)
from polystream.errors import APIStatusError, TransportError
from polystream.events import ErrorInfo, Event, StreamWarning
from polystream.gateway_core import GatewayConfig, family_refusal, presented_key, scrub
from polystream.journal import Journal, MemoryJournal
from polystream.request import Request, RequestError, auth_headers, error_body, parse_request
from polystream.request.codecs import extra_fields, sent_extra
from polystream.retry import RetryPolicy
from polystream.scrub import SCRUBBED_EVENTS, Scrubber, url_credentials
from polystream.server._gateway_media import (
    Inbound,
    RelayFailure,
    read_inbound,
    relay,
    relay_body,
    relayed_headers,
    upstream_url,
)
from polystream.server._gateway_resume import JOURNAL_LAG_SECONDS as _JOURNAL_LAG_SECONDS  # noqa: F401
from polystream.server._gateway_resume import REPLAY_BYTES as _REPLAY_BYTES  # noqa: F401
from polystream.server._gateway_resume import Resumes
from polystream.server._gateway_stream import SSE_HEADERS as _SSE_HEADERS  # noqa: F401
from polystream.server._gateway_stream import TENANT as _TENANT
from polystream.server._gateway_stream import StreamPump, StreamReplies
from polystream.server._gateway_stream import StreamState as _StreamState  # noqa: F401
from polystream.server._gateway_stream import reply_failure as _reply_failure
from polystream.server._gateway_write import WriteDeadline as _WriteDeadline  # noqa: F401
from polystream.server._gateway_ws import SocketRelays
from polystream.server._h1server import SEND_NOWAIT
from polystream.server._inspect import mount_inspector
from polystream.server._journal_feed import JournalFeed

__all__ = ["create_gateway"]

logger = logging.getLogger("polystream.gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_FIELD_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
"""A request field's name as a response header may carry it (any other is not echoed)."""


def _match(method: str, path: str) -> tuple[str, str, dict[str, str], bool | None, bool] | None:
    """(inbound dialect, action, params, whether the route decides streaming, whether
    it takes a multipart form) for a gateway path, from the dialects' routes; None when
    no route matches."""
    found = match_route(method, path)
    if found is None:
        return None
    route = found.route
    return (found.dialect, route.action, dict(found.params), route.stream, bool(route.form_file))


def _last_event_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's ``Last-Event-ID`` (ASGI header names are lowercase)."""
    for name, value in headers:
        if name == b"last-event-id":
            return value.decode("latin-1")
    return None


def _declared_too_large(headers: list[tuple[bytes, bytes]], limit: int) -> bool:
    """Whether the request's ``Content-Length`` declares a body over ``limit``."""
    for name, value in headers:
        if name == b"content-length":
            return value.isdigit() and int(value) > limit
    return False


def _prefix_dialect(path: str) -> str:
    """The dialect whose error shape answers a path that matches no route: its
    provider's default dialect (the first registered dialect under no provider's
    prefix)."""
    provider = provider_of_path(path)
    return provider.default_dialect if provider is not None else next(iter(DIALECTS))


_FAILURE_STATUS: Final[dict[str, int]] = {
    "overloaded": 529,
    "rate_limit": 429,
    "quota": 429,
    "timeout": 504,
    "invalid_request": 400,
}
"""The status a non-streaming reply that failed in-band is answered with, by the
error's kind (any other: 502)."""


_UPSTREAM_CALL: Final[contextvars.ContextVar[StreamCall | None]] = contextvars.ContextVar(
    "polystream_gateway_upstream_call", default=None
)
"""The upstream call the current request task is making (see :func:`_call_finished`)."""


def _call_finished() -> bool:
    """Whether the current request's upstream call has finished.

    The client shell stops reading at the stream's last event (its Finish); what
    follows on the wire (Chat's ``[DONE]``, the chunked-encoding terminator) would stay
    unread and the connection would be closed, so that every request opened a new one.
    The upstream transport reads that tail when this says the call is complete; for a
    cancelled or resumed call, the connection is closed at once.
    """
    call = _UPSTREAM_CALL.get()
    return call is not None and call.finished


def _upstream_transport() -> httpx.AsyncBaseTransport:
    """Pooled HTTP/1.1 connections (kept alive between requests) that do not delay ACKs.

    On a kept-alive connection, Linux delays ACKs by up to 40 ms once the connection
    looks interactive (request, reply, request...); an upstream that writes one small
    segment per event then waits on those ACKs, and a whole stream arrives tens of
    milliseconds late. ``TCP_QUICKACK`` (re-armed after every read) keeps it flowing.
    """
    return AsyncH1Transport(max_keepalive_connections=256, tcp_quickack=True, drain=_call_finished)


class _Gateway:
    def __init__(
        self,
        config: GatewayConfig,
        *,
        journal: Journal | None,
        transport: httpx.AsyncBaseTransport | None,
        retry: RetryPolicy | None,
    ) -> None:
        self.config = config
        self.journal = journal if journal is not None else MemoryJournal()
        self.inspector = mount_inspector(self)  # /inspect; a read-only tap on the journal
        self.limits = config.limits
        # Every text bound for a client, the journal or the log passes through it: the
        # secrets the gateway holds, and the credentials in its upstreams' URLs.
        urls = [c for u in config.upstreams.values() for c in url_credentials(u.base_url)]
        self.secrets = Scrubber([*config.secrets(), *urls])
        self.tenants = config.tenants()
        if self.tenants.open:
            logger.warning(
                "no client key is configured: the gateway is open to any client, and all "
                "streams belong to one anonymous tenant (any client can resume any stream "
                "whose id it has)"
            )
        self.retry = retry or RetryPolicy()
        self.active = 0
        # The journal feeds of this process's streams, by every id a resume may name.
        self.feeds: dict[str, JournalFeed] = {}
        self.replies = StreamReplies(
            error=self._error,
            failed_reply=self._failed_reply,
            upstream_error=self._upstream_error,
            losses=self._loss_headers,
        )
        self.resumes = Resumes(self.journal, self.limits, self.feeds, self.replies)
        self.sockets = SocketRelays(
            config,
            tenants=self.tenants,
            secrets=self.secrets,
            limits=self.limits,
            slots=self._slot,
            log_usage=config.log_socket_usage,
        )
        pool = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        if transport is None:
            transport = _upstream_transport()
        timeout = httpx.Timeout(connect=10.0, read=self.limits.idle_timeout, write=30.0, pool=10.0)
        self.http = httpx.AsyncClient(transport=transport, timeout=timeout, limits=pool)
        # On the gateway's own transport, upstream calls skip httpx's client layer.
        self.upstream: httpx.AsyncClient | DirectClient = self.http
        if isinstance(transport, AsyncH1Transport):
            self.upstream = DirectClient(
                transport,
                timeout=timeout,
                fallback=self.http,
                user_agent=f"polystream-gateway/{__version__}",
            )

    def _slot(self, delta: int) -> bool:
        """Take a concurrency slot (``+1``; False: none is free) or give one back."""
        if delta > 0:
            if self.active >= self.limits.max_concurrency:
                return False
            self.active += 1
        else:
            self.active -= 1
        return True

    async def _json(
        self,
        send: Send,
        status: int,
        body: Any,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        data = msgspec.json.encode(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                    *(headers or []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _error(
        self,
        send: Send,
        dialect: str,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        message = scrub(message, self.secrets)
        if param is not None:
            param = scrub(param, self.secrets)
        await self._json(
            send, status, error_body(dialect, status, message, kind=kind, param=param), headers
        )

    async def _too_large(
        self, send: Send, dialect: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        """Answer a request whose body is over ``max_body_bytes`` (413)."""
        await self._error(
            send,
            dialect,
            413,
            f"request body larger than {self.limits.max_body_bytes} bytes",
            kind="request_too_large",
            headers=headers,
        )

    async def _read_body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                return b"\x00too-large"
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- the app ------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.http.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            await self.sockets.serve(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        method = scope["method"]
        path = scope["path"]
        status_box = [0]

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            await send(message)

        # The server's send without waiting, when it has one (polystream's own does).
        nowait: Callable[[Message], bool] | None = (scope.get("extensions") or {}).get(SEND_NOWAIT)
        tracked_nowait: Callable[[Message], bool] | None = None
        if nowait is not None:

            def tracked_nowait(message: Message) -> bool:
                if message["type"] == "http.response.start":
                    status_box[0] = message["status"]
                return nowait(message)

        try:
            await self._handle(scope, receive, tracked, tracked_nowait, method, path)
        except Exception as exc:  # never a traceback to the client
            logger.error(
                "gateway error on %s %s: %s",
                method,
                path,
                scrub(f"{type(exc).__name__}: {exc}", self.secrets),
            )
            if status_box[0] == 0:
                with contextlib.suppress(Exception):
                    await self._error(send, _prefix_dialect(path), 500, "internal gateway error")
        finally:
            logger.info(
                "%s %s -> %s in %.1f ms",
                method,
                path,
                status_box[0] or "-",
                (time.perf_counter() - started) * 1000,
            )

    async def _handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        nowait: Callable[[Message], bool] | None,
        method: str,
        path: str,
    ) -> None:
        if self.inspector.claims(path):  # (its API takes the client keys itself)
            await self.inspector(scope, receive, send)
            return
        matched = _match(method, path)
        if matched is None:
            await self._error(
                send,
                _prefix_dialect(path),
                404,
                f"no such endpoint: {method} {path}",
                kind="not_found",
            )
            return
        dialect, action, params, route_streams, form = matched
        raw_query = scope.get("query_string", b"")
        query = dict(parse_qsl(raw_query.decode("latin-1"))) if raw_query else {}
        raw_headers: list[tuple[bytes, bytes]] = scope["headers"]
        if nowait is None and not _hosts_agree(raw_headers):
            # (polystream's own server refuses such a request itself; others, such as
            # uvicorn, leave the Host header to the application.)
            await self._error(
                send,
                dialect,
                400,
                "a request has at most one Host header",
                kind="invalid_request",
                headers=[(b"connection", b"close")],
            )
            return
        tenants = self.tenants
        if tenants.open:
            tenant: str | None = tenants.identify(None)
        else:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
            tenant = tenants.identify(presented_key(dialect, headers, query))
            if tenant is None:
                await self._error(
                    send, dialect, 401, "missing or invalid API key", kind="authentication"
                )
                return
        assert tenant is not None
        _TENANT.set(tenant)
        if _declared_too_large(raw_headers, self.limits.max_body_bytes):
            # Refused before any of the body is read (uvicorn has no early 413; the own
            # server's comes first); the connection closes, leaving the body unread.
            await self._too_large(send, dialect, [(b"connection", b"close")])
            return
        body = await self._read_body(receive)
        if body is None:
            return
        if body == b"\x00too-large":
            await self._too_large(send, dialect)
            return
        if self.active >= self.limits.max_concurrency:
            await self._error(
                send,
                dialect,
                503,
                "the gateway is at its concurrency limit",
                kind="overloaded",
                headers=[(b"retry-after", b"1")],
            )
            return
        self.active += 1
        try:
            if action == "resume":
                await self.resumes.native(send, receive, dialect, params["id"], query, tenant)
            elif (last_id := _last_event_id(raw_headers)) is not None:
                await self.resumes.counter(send, receive, dialect, last_id, tenant)
            else:
                inbound = _Inbound(
                    method, path, raw_query.decode("latin-1"), raw_headers, body, form
                )
                await self._create(
                    send, receive, dialect, route_streams, params, query, inbound, nowait
                )
        finally:
            self.active -= 1

    # -- a new stream -------------------------------------------------------------------

    async def _create(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        route_streams: bool | None,
        params: dict[str, str],
        query: dict[str, str],
        inbound: _Inbound,
        nowait: Callable[[Message], bool] | None = None,
    ) -> None:
        spec = DIALECTS[dialect]
        # A session's stream (a GET) has no body: it names its session in the path.
        session = params.get("id") if inbound.method == "GET" else None
        try:
            read = read_inbound(
                inbound.method,
                _header(inbound.headers, b"content-type") if inbound.form else None,
                inbound.body,
                self.limits.max_body_bytes,
            )
            if session is not None:
                request = Request(model="")
            else:
                request = parse_request(dialect, read.payload, model=params.get("model"))
        except RequestError as exc:
            await self._error(
                send, dialect, 400, exc.message, kind="invalid_request", param=exc.param
            )
            return
        payload = read.payload
        streaming = request.stream
        framing = "sse"
        if route_streams is not None:  # (the path decides, not the body: Gemini's verbs)
            streaming = route_streams
        if "raw" in spec.framings:
            # (A request that asks for no event stream gets the media itself, streamed.)
            framing = "sse" if request.stream else "raw"
            streaming = True
        elif len(spec.framings) > 1:  # (?alt=sse, or the default JSON array)
            framing = "sse" if query.get("alt") == "sse" else "json_array"
        routed = self.config.route(request.model, dialect)
        if routed is None:
            await self._error(
                send,
                dialect,
                404,
                f"no upstream serves model {request.model!r}",
                kind="not_found",
                param="model",
            )
            return
        upstream, model = routed
        refusal = family_refusal(dialect, upstream.dialect)
        if refusal is not None:
            await self._error(send, dialect, 400, refusal, kind="invalid_request", param="model")
            return
        if spec.family not in TEXT_FAMILIES and not streaming:
            await self._relay(send, dialect, upstream, request, model, inbound, read)
            return
        # Fields the unified request does not name go upstream only in their own
        # dialect (less those the upstream's configuration drops); elsewhere they are
        # not sent. The response says which were not.
        headers: list[tuple[bytes, bytes]] = []
        passing = upstream.dialect == dialect
        native_body: dict[str, Any] | None = payload if passing else None
        dropped: list[str] = []
        if request.extra and not sent_extra(upstream.dialect, request):
            dropped = extra_fields(request)
        elif passing and upstream.drop_fields:
            # The fields this upstream never takes from a client (its configuration).
            dropped = sorted(name for name in upstream.drop_fields if name in payload)
            native_body = {k: v for k, v in payload.items() if k not in upstream.drop_fields}
        if dropped:
            names = scrub(
                ", ".join(name if _FIELD_NAME.fullmatch(name) else "(unnamed)" for name in dropped),
                self.secrets,
            )
            logger.info(
                "request fields the %s upstream does not take, not sent: %s",
                upstream.dialect,
                names,
            )
            headers.append((b"x-polystream-dropped-fields", names[:1000].encode()))
        upstream_request = msgspec.structs.replace(
            request,
            model=model,
            stream=True,
            background=request.background or upstream.background,
            # A unary reply states its usage: the stream it is made from must carry it.
            include_usage=request.include_usage or not streaming,
        )
        try:
            call = StreamCall(
                upstream.dialect,
                upstream_request,
                api_key=upstream.key(),
                base_url=upstream.base_url,
                policy=self.retry,
                keep_events=False,
                keep_result=False,
                framing=framing if "raw" in spec.framings else "sse",
                # The same dialect both ways: the client's body goes as it came (a
                # form byte for byte, unless the call changes a field of it).
                native_body=native_body,
                files=read.files,
                native_form=read.form if native_body is payload else None,
                session=session,
                # (A session's stream takes the client's query, its key aside.)
                query={k: v for k, v in query.items() if f"?{k}" not in spec.auth.accepts}
                if session is not None
                else None,
            )
        except RequestError as exc:
            await self._error(
                send,
                dialect,
                400,
                f"cannot translate this request for the {upstream.dialect} upstream: {exc.message}",
                kind="invalid_request",
                param=exc.param,
            )
            return
        options: dict[str, Any] = {"framing": framing} if len(spec.framings) > 1 else {}
        _UPSTREAM_CALL.set(call)  # this request's task (and its producer, created below)
        stream = AsyncEventStream(self.upstream, call)
        if not streaming:
            await self._unary(send, dialect, options, stream, headers)
            return
        await self._stream(send, receive, dialect, options, stream, nowait, headers)

    async def _relay(
        self,
        send: Send,
        dialect: str,
        upstream: Any,
        request: Request,
        model: str,
        inbound: _Inbound,
        read: Inbound,
    ) -> None:
        """Relay a media or agent request that asks for no stream to the upstream of
        its dialect (see :func:`~polystream.server._gateway_media.relay`)."""
        try:
            content_type, content = relay_body(dialect, request, model, read)
        except RequestError as exc:
            await self._error(
                send, dialect, 400, exc.message, kind="invalid_request", param=exc.param
            )
            return
        headers = relayed_headers(_headers(inbound.headers), content_type)
        headers.update(auth_headers(upstream.dialect, upstream.key()))
        url = upstream_url(upstream.dialect, upstream.base_url, inbound.path, inbound.query)
        try:
            failed = await relay(
                send,
                self.upstream,
                url,
                method=inbound.method,
                headers=headers,
                content=content,
                retry=self.retry,
                max_reply_bytes=self.limits.max_reply_bytes,
            )
        except RelayFailure as exc:
            await self._error(send, dialect, 502, str(exc), kind="server")
            return
        if failed is not None:
            await self._upstream_error(send, dialect, failed)

    async def _unary(
        self,
        send: Send,
        dialect: str,
        options: dict[str, Any],
        events: AsyncEventStream,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        encoder = get_dialect(dialect).encoder(**options)
        parts: list[bytes] = []
        size = 0
        most = self.limits.max_reply_bytes
        failure: ErrorInfo | None = None
        try:
            async for event in events:
                if type(event) is StreamWarning and event.code in ("retry", "resume"):
                    continue
                if failure is None:
                    failure = _reply_failure(event)
                data = encoder.encode(self._client_event(event))
                size += len(data)
                if size > most:
                    # Stop reading the upstream: what it sends would only grow the reply.
                    await events.aclose()
                    await self._error(
                        send,
                        dialect,
                        502,
                        f"the upstream reply exceeded the gateway's limit of {most} bytes "
                        "(max_reply_bytes)",
                        kind="server",
                    )
                    return
                parts.append(data)
        except APIStatusError as exc:
            await events.aclose()
            await self._upstream_error(send, dialect, exc)
            return
        except TransportError as exc:
            await self._error(send, dialect, 502, str(exc), kind="server")
            return
        if failure is not None:
            # A reply that failed or was cut short is an error, never a partial 200.
            await self._failed_reply(send, dialect, failure)
            return
        parts.append(encoder.close())
        info = get_dialect(dialect)
        decoder = info.decoder(**options)
        unified = decoder.feed(b"".join(parts)) + decoder.close()
        await self._json(
            send, 200, info.rebuild(unified), [*(headers or ()), *self._loss_headers(encoder)]
        )

    def _loss_headers(self, encoder: Any) -> list[tuple[bytes, bytes]]:
        """Report what the client's dialect could not carry (a header for unary replies,
        a log line for streams, whose headers leave before the losses are known)."""
        losses = encoder.losses
        if not losses:
            return []
        summary = scrub(", ".join(sorted({loss.describe() for loss in losses})), self.secrets)
        logger.info("transcoding losses (%d): %s", len(losses), summary)
        return [(b"x-polystream-losses", f"{len(losses)}; {summary}"[:1000].encode())]

    def _client_event(self, event: Event) -> Event:
        """``event`` as a client (and the journal) may have it: the text it carries
        from elsewhere (an upstream's error, a native event) without secrets."""
        return self.secrets.event(event) if type(event) in SCRUBBED_EVENTS else event

    async def _failed_reply(
        self,
        send: Send,
        dialect: str,
        failure: ErrorInfo,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Answer a request whose upstream reply failed in-band or was cut short before
        any of it was sent (a non-streaming reply, or a stream before its first output):
        the error's status (502 for a reply cut short or a server error), in the client
        dialect's error shape."""
        status = _FAILURE_STATUS.get(failure.kind, 502)
        if failure.kind == "overloaded":
            status = DIALECTS[dialect].errors.overloaded_status  # (529 is Anthropic's own)
        await self._error(
            send,
            dialect,
            status,
            f"upstream: {failure.message}",
            kind=failure.kind,
            headers=headers,
        )

    async def _upstream_error(self, send: Send, dialect: str, exc: APIStatusError) -> None:
        if 300 <= exc.status_code < 400:
            # A redirect means nothing to the gateway's client (it cannot follow it with
            # the gateway's key, and the upstream's URL is not its business).
            await self._error(
                send,
                dialect,
                502,
                f"the upstream answered HTTP {exc.status_code} (a redirect), "
                "which the gateway does not follow",
                kind="server",
            )
            return
        headers = []
        if exc.retry_after is not None:
            headers.append((b"retry-after", str(int(exc.retry_after + 0.999)).encode()))
        message = exc.args[0] if exc.args else "upstream error"
        await self._error(
            send, dialect, exc.status_code, f"upstream: {message}", kind=exc.kind, headers=headers
        )

    async def _stream(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        options: dict[str, Any],
        stream: AsyncEventStream,
        nowait: Callable[[Message], bool] | None = None,
        extra_headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Stream the upstream's events to the client, transcoded (see
        :class:`~polystream.server._gateway_stream.StreamPump`)."""
        pump = StreamPump(
            send,
            receive,
            dialect,
            options,
            stream,
            nowait,
            extra_headers,
            limits=self.limits,
            journal=self.journal,
            feeds=self.feeds,
            secrets=self.secrets,
            replies=self.replies,
            cut=DIALECTS[dialect].stream.ends_aborted,
            keepalives=DIALECTS[dialect].stream.relays_upstream_keepalive,
            comment=DIALECTS[dialect].stream.keepalive,
        )
        await pump.run()


class _Inbound(NamedTuple):
    """A request as the gateway's handling of a new stream reads it."""

    method: str
    path: str
    query: str  # as it came
    headers: list[tuple[bytes, bytes]]  # as ASGI gives them (names lowercase)
    body: bytes
    form: bool  # its route takes a multipart form


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


def _header(raw: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """A request header's value (the first, if repeated), or None."""
    for key, value in raw:
        if key == name:
            return value.decode("latin-1")
    return None


def _hosts_agree(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request has at most one Host header (RFC 9112, 3.2: two leave which
    host is meant to whoever reads the request next, the shape of a smuggled request).
    A missing one is the server's to refuse: the gateway routes by path, and an app
    called directly may be given a scope without one."""
    hosts = 0
    for name, _ in headers:
        if len(name) == 4 and name.lower() == b"host":
            hosts += 1
    return hosts <= 1


def create_gateway(
    config: GatewayConfig,
    *,
    journal: Journal | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    retry: RetryPolicy | None = None,
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """Build the gateway ASGI app.

    Args:
        config: Upstreams, routes, the client key and limits.
        journal: Where to record streams for resume (default: in memory).
        transport: An httpx transport for upstream calls (tests).
        retry: Upstream retry policy.
    """
    return _Gateway(config, journal=journal, transport=transport, retry=retry)
