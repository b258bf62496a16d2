"""The gateway: a client speaks any inbound dialect, the gateway calls the configured
upstream in the upstream's own dialect and transcodes the reply back, event by event.

This module only moves bytes: routing, authentication, request translation, retries,
resume decisions, transcoding and journal cursors all live in the sans-I/O core
(:mod:`polystream.proxy`, :mod:`polystream.request`, :mod:`polystream.call`, the
dialect encoders, :mod:`polystream.journal`).

Paths are the emulator's: ``/openai/v1/...``, ``/xai/v1/...``, ``/anthropic/v1/...``,
``/gemini/v1beta/...``. Resume:

* OpenAI Responses: ``GET /openai/v1/responses/{id}?stream=true&starting_after=N``;
* Gemini Interactions: ``GET /gemini/v1beta/interactions/{id}?stream=true&last_event_id=E``;
* every other SSE dialect: send the same request again with ``Last-Event-ID`` (the
  gateway writes ``id: <stream>.<n>`` on each event).

Each stream is journalled under an id the gateway mints (``x-polystream-stream-id``, 128
random bits), bound to the tenant whose key created it and to the client's dialect; a
native id (a response's or interaction's own) leads to it through an alias of that
tenant and dialect. A resume by any other tenant, or through another dialect, is the
404 of an unknown id.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import operator
import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final
from urllib.parse import parse_qsl

import httpx
import msgspec

from polystream import __version__
from polystream.call import StreamCall
from polystream.client import AsyncEventStream
from polystream.client._h1 import AsyncH1Transport, DirectClient
from polystream.dialects import get_dialect
from polystream.errors import APIStatusError, PolystreamError, TransportError
from polystream.events import (
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    Warning,
)
from polystream.journal import Entry, Journal, JournalConflict, JournalMiss, MemoryJournal
from polystream.proxy import (
    ANONYMOUS_TENANT,
    GatewayConfig,
    SSECursorSplitter,
    alias_id,
    counter_cursors,
    presented_key,
    scrub,
)
from polystream.request import RequestError, error_body, parse_request
from polystream.request.codecs import extra_fields, sent_extra
from polystream.retry import RetryPolicy
from polystream.scrub import SCRUBBED_EVENTS, Scrubber, url_credentials
from polystream.server._h1server import SEND_NOWAIT
from polystream.server._journal_feed import JournalFeed
from polystream.wire.jsondepth import body_error, decode_body

__all__ = ["create_gateway"]

logger = logging.getLogger("polystream.gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_SSE_HEADERS: Final = [
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_FIELD_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
"""A request field's name as a response header may carry it (any other is not echoed)."""
_FIRST_OUTPUT: Final = frozenset(
    {TextDelta, ReasoningDelta, ToolInputDelta, DataDelta, Finish, ErrorEvent}
)
"""Events that end the opening of a stream: the first of them is written at once, not
with the rest of its read."""
_CONTENT: Final = frozenset({TextDelta, ReasoningDelta, ToolInputDelta, DataDelta})
"""The deltas that are a stream's output: before the first of them (or a Finish that
did not fail) nothing of a streaming response leaves (see :func:`_opens`)."""
_OPENING_BYTES: Final = 64 * 1024
"""Most encoded bytes of a stream's opening held back before its first output; an
opening longer than that is written as it is, and the stream has begun."""
_REPLAY_BYTES: Final = 64 * 1024
"""Most journalled bytes a resume joins into one write (whole entries; at least one)."""
_MINTED: Final = re.compile(r"[0-9a-f]{32}")
"""The shape of the stream ids the gateway mints (``secrets.token_hex(16)``)."""
_TENANT: Final[contextvars.ContextVar[str | None]] = contextvars.ContextVar(
    "polystream_gateway_tenant", default=None
)
"""The tenant of the current request (set by ``_handle``, read by its stream's state)."""
_JOURNAL_LAG_SECONDS: Final = 1.0
"""How long a resume waits for its stream or cursor to reach a shared (blocking)
journal: another gateway instance writes it off its client's path, so a client may hold
an event a few milliseconds before the journal does."""


def _match(method: str, path: str) -> tuple[str, str, dict[str, str]] | None:
    """(inbound dialect, action, params) for a gateway path, or None."""
    parts = path.strip("/").split("/")
    if len(parts) < 3:
        return None
    prefix = parts[0]
    rest = "/".join(parts[1:])
    if prefix in ("openai", "xai"):
        if rest == "v1/responses" and method == "POST":
            return (f"{prefix}_responses", "create", {})
        if rest.startswith("v1/responses/") and method == "GET" and len(parts) == 4:
            return (f"{prefix}_responses", "resume", {"id": parts[3]})
        if rest == "v1/chat/completions" and method == "POST":
            return (f"{prefix}_chat", "create", {})
        if prefix == "xai" and rest == "v1/messages" and method == "POST":
            return ("xai_messages", "create", {})
        return None
    if prefix == "anthropic" and rest == "v1/messages" and method == "POST":
        return ("anthropic_messages", "create", {})
    if prefix == "gemini" and len(parts) >= 3:
        version = parts[1]
        if version not in ("v1beta", "v1", "v1alpha"):
            return None
        if parts[2] == "interactions":
            if len(parts) == 3 and method == "POST":
                return ("gemini_interactions", "create", {})
            if len(parts) == 4 and method == "GET":
                return ("gemini_interactions", "resume", {"id": parts[3]})
            return None
        if parts[2] == "models" and len(parts) == 4 and method == "POST":
            model, _, verb = parts[3].partition(":")
            if verb in ("streamGenerateContent", "generateContent"):
                return ("gemini_generate", verb, {"model": model})
    return None


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
    prefix = path.strip("/").split("/")[0]
    return {
        "anthropic": "anthropic_messages",
        "gemini": "gemini_generate",
        "xai": "xai_chat",
    }.get(prefix, "openai_chat")


def _ends_aborted(dialect: str) -> bool:
    """Whether a failed stream of ``dialect`` ends with an aborted transfer after its
    in-band error: Gemini's generate streams (SSE and the JSON array) have no terminal
    error a reader must take as the end, so the last chunk is never sent and the
    connection is cut. Every other dialect ends with its own in-band error."""
    return dialect == "gemini_generate"


def _keepalive(dialect: str) -> bytes:
    """The keep-alive a client of ``dialect`` is sent during an upstream silence (empty:
    none). google-genai parses every line of a generate stream that is not ``data:``
    as JSON, so that stream never gets one. Elsewhere it is an SSE comment line with
    no blank line after it: the OpenAI SDK's reader, once it has seen an ``id:``,
    dispatches an event with empty data at every blank line and fails to parse it;
    the comment line alone is skipped by every reader, and the next event's own blank
    line ends that event as usual."""
    return b"" if dialect == "gemini_generate" else b": keep-alive\n"


_UPSTREAM_KEEPALIVES: Final = frozenset(
    {"anthropic_messages", "xai_messages", "gemini_interactions"}
)
"""The client dialects an upstream's keep-alive is transcoded for (a ``ping`` event or an
SSE comment, which their SDKs skip). To any other client it is not sent: an OpenAI SDK
reader fails on a comment followed by a blank line (see :func:`_keepalive`), google-genai
on any comment; the gateway's own keep-alives cover the upstream's silences."""


def _failure_told(message: str) -> list[Event]:
    """How an upstream call that failed after the stream began reaches the client: the
    client dialect's in-band error and a failed end."""
    error = ErrorInfo(kind="server", message=message, http_status=502)
    return [
        ErrorEvent(error=error),
        Finish(status="failed", reason=FinishReason(unified="error"), error=error),
    ]


_FAILURE_STATUS: Final[dict[str, int]] = {
    "overloaded": 529,
    "rate_limit": 429,
    "quota": 429,
    "timeout": 504,
    "invalid_request": 400,
}
"""The status a non-streaming reply that failed in-band is answered with, by the
error's kind (any other: 502)."""


def _reply_failure(event: Event) -> ErrorInfo | None:
    """The failure a non-streaming reply's event states (None: it states none): an
    in-band error, or an end that failed or was cut short."""
    if type(event) is ErrorEvent and event.error.kind != "protocol":
        return event.error
    if type(event) is Finish and event.status == "truncated":
        cause = event.error.message if event.error is not None else "no terminal event"
        return ErrorInfo(kind="server", message=f"the reply was cut short: {cause}")
    if type(event) is Finish and event.status == "failed":
        return event.error or ErrorInfo(kind="server", message="the reply failed")
    return None


def _opens(event: Event) -> bool:
    """Whether ``event`` is a stream's output: a delta, a block that starts with its
    content, or an end that did not fail (a reply with no content at all)."""
    if type(event) in _CONTENT:
        return True
    if isinstance(event, BlockStart):
        return event.value is not None
    return isinstance(event, Finish) and event.status not in ("failed", "truncated")


def _retry_after_header(error: ErrorInfo) -> list[tuple[bytes, bytes]]:
    """The ``Retry-After`` an in-band error carries (Google's ``RetryInfo`` detail,
    ``"retryDelay": "12s"``), as a header of whole seconds; none when it carries none."""
    raw = error.raw
    details = raw.get("details") if isinstance(raw, dict) else None
    if not isinstance(details, list):
        return []
    for detail in details:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith(
            "google.rpc.RetryInfo"
        ):
            continue
        delay = detail.get("retryDelay")
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                seconds = float(delay[:-1])
            except ValueError:
                return []
            if 0 <= seconds <= 86_400:
                return [(b"retry-after", str(math.ceil(seconds)).encode())]
    return []


def _truncation_told(finish: Finish) -> list[Event]:
    """How an upstream reply cut short (a ``truncated`` Finish) reaches the client: the
    client dialect's in-band error and a failed end, never a clean one."""
    cause = finish.error.message if finish.error is not None else "no terminal event"
    error = ErrorInfo(
        kind="server", message=f"the upstream reply was cut short: {cause}", http_status=502
    )
    return [
        ErrorEvent(error=error),
        Finish(
            status="failed", reason=FinishReason(unified="error"), usage=finish.usage, error=error
        ),
    ]


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


class _WriteDeadline:
    """How long each of one task's writes to the client may take, kept by one timer.

    ``asyncio.timeout`` around a write arms a timer and cancels it, about 5 us a write
    (the pump writes once per upstream read, so once per event of a paced stream). Here
    a write notes when it began, and the timer is armed only when none is pending: when
    it fires, a write that has taken the whole limit is cancelled (:meth:`send` then
    returns False, as for ``TimeoutError``), a write under way for less re-arms it for
    that write's own deadline, and with no write under way it lapses until the next.
    One task writes at a time (the stream's pump). :attr:`last` is when the last write
    began: the stream's watcher reads it to tell an upstream silence (keep-alive
    comments) from a stream that is writing.
    """

    __slots__ = (
        "_cancelling",
        "_expired",
        "_handle",
        "_limit",
        "_loop",
        "_since",
        "_task",
        "_when",
        "last",
    )

    def __init__(self, limit: float) -> None:
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0  # when the pending timer fires
        self._since: float | None = None  # when the write under way began
        self._task: asyncio.Task[Any] | None = None  # the task writing
        self._cancelling = 0  # its cancellation requests before the write
        self._expired = False
        self.last = self._loop.time()  # when the last write began (or this was made)

    async def send(self, send: Send, message: Message) -> bool:
        """``await send(message)``; False when it took the limit (the write was
        cancelled) or the connection failed."""
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._cancelling = task.cancelling()
        loop = self._loop
        self._since = self.last = now = loop.time()
        if self._handle is None:
            self._when = now + self._limit
            self._handle = loop.call_at(self._when, self._check)
        try:
            await send(message)
        except asyncio.CancelledError:
            if self._expired:
                self._expired = False
                # The deadline's own cancellation, unless another is pending too (as
                # asyncio.timeout decides).
                if task.uncancel() <= self._cancelling:
                    return False
            raise
        except OSError:
            return False
        finally:
            self._since = None
            self._task = None
        return True

    def _check(self) -> None:
        self._handle = None
        since = self._since
        if since is None:
            return  # no write under way: the next one arms the timer
        due = since + self._limit
        if due <= self._when:
            self._expired = True
            assert self._task is not None
            self._task.cancel()
        else:
            self._when = due
            self._handle = self._loop.call_at(due, self._check)

    def close(self) -> None:
        """Drop the pending timer (unless a write is under way: it keeps its bound)."""
        if self._handle is not None and self._since is None:
            self._handle.cancel()
            self._handle = None


class _StreamState:
    """What the pump and the watcher of one stream share."""

    __slots__ = (
        "aborted",
        "alias",
        "deadline",
        "ended",
        "feed",
        "gone",
        "journal_id",
        "sending",
        "started",
        "tenant",
    )

    def __init__(self, deadline: _WriteDeadline) -> None:
        self.deadline = deadline  # the bound on each of the pump's writes
        self.started = False  # the response (a stream, or an error) has begun
        self.ended = False  # the response is complete
        self.gone = False  # the client disconnected
        self.aborted = False  # the client was too slow: the response stays incomplete
        self.sending = False  # a write to the client is in progress
        self.journal_id: str | None = None
        # The stream's journal writes, off its path, when the journal blocks.
        self.feed: JournalFeed | None = None
        self.tenant = _TENANT.get()  # who may resume the stream (the request's tenant)
        self.alias: str | None = None  # the native id's alias, once tried ("": not made)


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
        self._feeds: dict[str, JournalFeed] = {}
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

    # -- plumbing -----------------------------------------------------------------------

    async def _journal(self, method: str, *args: Any, **kwargs: Any) -> Any:
        function = getattr(self.journal, method)
        if self.journal.blocking:
            return await asyncio.to_thread(function, *args, **kwargs)
        return function(*args, **kwargs)

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
        dialect, action, params = matched
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
                await self._resume_native(send, receive, dialect, params["id"], query, tenant)
            elif (last_id := _last_event_id(raw_headers)) is not None:
                await self._resume_counter(send, receive, dialect, last_id, tenant)
            else:
                await self._create(send, receive, dialect, action, params, query, body, nowait)
        finally:
            self.active -= 1

    # -- a new stream -------------------------------------------------------------------

    async def _create(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        action: str,
        params: dict[str, str],
        query: dict[str, str],
        body: bytes,
        nowait: Callable[[Message], bool] | None = None,
    ) -> None:
        try:
            payload = decode_body(body)
        except msgspec.DecodeError as exc:
            await self._error(send, dialect, 400, body_error(exc), kind="invalid_request")
            return
        try:
            request = parse_request(dialect, payload, model=params.get("model"))
        except RequestError as exc:
            await self._error(
                send, dialect, 400, exc.message, kind="invalid_request", param=exc.param
            )
            return
        streaming = request.stream
        framing = "sse"
        if dialect == "gemini_generate":
            streaming = action == "streamGenerateContent"
            framing = "sse" if query.get("alt") == "sse" else "json_array"
        routed = self.config.route(request.model)
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
                # The same dialect both ways: the client's body goes as it came.
                native_body=native_body,
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
        options: dict[str, Any] = {"framing": framing} if dialect == "gemini_generate" else {}
        _UPSTREAM_CALL.set(call)  # this request's task (and its producer, created below)
        stream = AsyncEventStream(self.upstream, call)
        if not streaming:
            await self._unary(send, dialect, options, stream, headers)
            return
        await self._stream(send, receive, dialect, options, stream, nowait, headers)

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
                if type(event) is Warning and event.code in ("retry", "resume"):
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
        summary = scrub(", ".join(sorted({loss.what for loss in losses})), self.secrets)
        logger.info("transcoding losses (%d): %s", len(losses), summary)
        return [(b"x-polystream-losses", f"{len(losses)}; {summary}"[:1000].encode())]

    @staticmethod
    def _unreadable(error: ErrorInfo) -> None:
        """Log an upstream event the decoder could not read (skipped: the client's
        stream goes on with the events around it), with where it stood."""
        logger.warning(
            "upstream %s event %s at byte %s could not be read, skipped: %s",
            error.dialect,
            error.event_index,
            error.byte_offset,
            error.message,
        )

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
        if failure.kind == "overloaded" and dialect not in ("anthropic_messages", "xai_messages"):
            status = 503  # (529 is Anthropic's own)
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
        """Stream the upstream's events to the client, transcoded.

        This request's task pumps: it sends the upstream request at once (no turn of
        the event loop between the request's handling and its upstream request), then
        reads the upstream a network read at a time, encodes that read's events and
        writes them to the client in one write. A watcher task makes the encoder and
        the response head while the upstream is asked, then watches the client: when
        it goes away, the pump is cancelled, or (with a resume grace period and a
        journal to feed) keeps feeding the journal for a bounded time. During upstream
        silences the watcher sends keep-alive comments.
        """
        sse = options.get("framing", "sse") == "sse"
        state = _StreamState(_WriteDeadline(self.limits.slow_client_seconds))
        encoder: Any = None

        def encoder_() -> Any:
            """The client's encoder, made on first use."""
            nonlocal encoder
            if encoder is None:
                encoder = get_dialect(dialect).encoder(**options)
            return encoder

        # (A reply's opening is where pushing can begin: see push below.)
        batches = stream.batches() if nowait is None else stream.batches(openings=True)
        call = stream.call

        splitter: SSECursorSplitter | None = None
        start: Message | None = None

        def response_start() -> Message:
            """The response head's message (and the stream id and cursor splitter it
            names), made once."""
            nonlocal splitter, start
            if start is None:
                headers = [(b"content-type", encoder_().content_type.encode()), *_SSE_HEADERS]
                if extra_headers:
                    headers += extra_headers
                if sse:
                    stream_id = secrets.token_hex(16)  # 128 random bits: unguessable
                    splitter = SSECursorSplitter(dialect, stream_id)
                    headers.append((b"x-polystream-stream-id", stream_id.encode()))
                start = {"type": "http.response.start", "status": 200, "headers": headers}
            return start

        async def flush(parts: list[bytes], last: bool = False) -> bool:
            """Write encoded events (the response head first; ``last``: and the end of
            the response); False to stop."""
            if not state.started:
                if state.gone:
                    return True
                state.started = True
                await send(response_start())
            if not parts and not last:
                return True
            return await self._out(send, state, splitter, dialect, parts, last)

        loop = asyncio.get_running_loop()
        held: list[bytes] = []  # what a pushed read could not write at once
        held_last = False  # ... and it ends the response
        pushed_last = False  # a pushed read ended the response (wrote it, or held it)

        # The opening events the upstream call holds back until the first output (so
        # that a retry can start over unseen), encoded as they come (see opening below),
        # and whether the encoder has encoded anything else.
        ahead: list[Event] = []
        ahead_parts: list[bytes] = []
        spent = False
        # Nothing leaves before the first output (a keep-alive before it is dropped);
        # once the stream's failure is encoded, its end is never a clean one (see
        # _ends_aborted).
        begun = False
        failing = False
        cut = _ends_aborted(dialect)
        keepalives = dialect in _UPSTREAM_KEEPALIVES  # (the upstream's, transcoded)
        # The encoded opening, held until the first output (bounded: _OPENING_BYTES), and
        # the failure that came before any output instead: the request is then answered
        # with its status (see pump), as a non-streaming one would be.
        opening_parts: list[bytes] = []
        opening_size = 0
        refused: ErrorInfo | None = None
        refused_headers: list[tuple[bytes, bytes]] = []

        def opening(events: list[Event]) -> None:
            """Encode the held opening events not encoded yet (nothing is written: the
            read that brings the first output writes them with it), so that the read
            that carries the first output has only its own events to encode."""
            if spent or len(events) <= len(ahead):
                return
            if ahead and events[0] is not ahead[0]:
                return  # not the same attempt's (encoded() starts over)
            encode = encoder_().encode
            for event in events[len(ahead) :]:
                data = encode(self._client_event(event))
                if data:
                    ahead_parts.append(data)
                ahead.append(event)

        def encoded(batch: list[Event]) -> list[bytes]:
            """A batch's events encoded for the client: none until the first output
            (the opening is held, and a failure before it is kept in ``refused``)."""
            nonlocal begun, opening_size, refused
            if refused is not None:
                return []  # (the request is answered with its status)
            if begun:
                return encoded_events(batch)
            for event in batch:
                if _opens(event):
                    parts = [*opening_parts, *encoded_events(batch)]
                    opening_parts.clear()
                    return parts
                if type(event) is ErrorEvent or type(event) is Finish:
                    failure = _reply_failure(event)
                    if failure is not None:
                        # Before any output (and no retry left): nothing more is encoded.
                        refused = failure
                        if type(event) is ErrorEvent:
                            refused_headers.extend(_retry_after_header(event.error))
                        opening_parts.clear()
                        return []
            parts = encoded_events(batch)
            opening_parts.extend(parts)
            opening_size += sum(map(len, parts))
            if opening_size > _OPENING_BYTES:
                # An opening this long is the stream's start: it leaves as it is.
                begun = True
                parts = opening_parts[:]
                opening_parts.clear()
                return parts
            return []

        def encoded_events(batch: list[Event]) -> list[bytes]:
            nonlocal encoder, spent, begun, failing
            if not batch:
                return []
            parts: list[bytes] = []
            if ahead:
                n = len(ahead)
                if len(batch) >= n and all(map(operator.is_, ahead, batch[:n])):
                    parts += ahead_parts
                    batch = batch[n:]
                else:
                    # Not those events (a retry started over): a new encoder, which has
                    # seen nothing, encodes whatever comes instead.
                    encoder = None
                ahead.clear()
                ahead_parts.clear()
            encode = encoder_().encode
            for event in batch:
                if type(event) in SCRUBBED_EVENTS:
                    if type(event) is Warning and event.code in ("retry", "resume"):
                        logger.info(
                            "upstream %s: %s", event.code, scrub(event.message, self.secrets)
                        )
                        continue
                    event = self.secrets.event(event)
                    if type(event) is ErrorEvent and event.error.kind == "protocol":
                        self._unreadable(event.error)
                if type(event) is KeepAlive:
                    if not (begun and keepalives):
                        continue  # (before the first output, nothing leaves)
                elif not begun:
                    begun = _opens(event)
                spent = True
                if type(event) is Finish and event.status in ("truncated", "failed"):
                    failing = True
                    if event.status == "truncated":
                        # A reply cut short is never a clean end: told as a failure.
                        for told in _truncation_told(event):
                            data = encode(told)
                            if data:
                                parts.append(data)
                        continue
                data = encode(event)
                if data:
                    parts.append(data)
            return parts

        def pushed(batch: list[Event]) -> bool:
            """One upstream read's events, encoded, journalled and written in that
            read's own callback, as the pump would (the response head first; the last
            events with the end of the response); False to hand the stream back to the
            pump."""
            nonlocal held_last, pushed_last
            assert nowait is not None
            parts = encoded(batch)
            if refused is not None:
                return False  # a failure before any output: the pump answers its status
            last = call.finished
            if last:
                tail = encoder_().close()
                if tail and not (failing and cut):
                    parts.append(tail)
                pushed_last = True
            if not state.started:
                if state.gone:
                    return not last  # no response, and no journal for it (as flush)
                if not parts and not last:
                    return True  # no output yet: nothing leaves (not even the head)
                state.started = True
                nowait(response_start())
            # The entries are journalled after the write, in this same callback: the
            # client has its bytes sooner, and no resume can run in between.
            data, entries = self._split(splitter, parts)
            taken = True
            ending = last and not (failing and cut)  # (a failure may end aborted)
            if not state.gone and (data or last):
                state.deadline.last = loop.time()
                message = {"type": "http.response.body", "body": data, "more_body": not ending}
                taken = nowait(message)
                if not taken:
                    held.append(data)  # the client is not taking writes: the pump waits
                    held_last = ending
                elif ending:
                    state.ended = True
            if entries:
                self._keep(state, splitter, dialect, entries)
            if not taken:
                return False
            feed = state.feed
            return not last and (feed is None or not feed.backlogged)

        async def push() -> list[Event] | None:
            """Each upstream read's events encoded, journalled and written in the read's
            own callback, with no task woken (on polystream's own server and upstream
            client): from the reply's opening until something needs the pump (a retry
            or resume, the end of the body, a write or a journal to wait for, a
            failure). The events left to the pump; None when pushing could not start
            (then the pump reads the next batch)."""
            if nowait is None:
                return None
            future = stream.push(pushed, opening)
            if future is None:
                return None
            try:
                rest = await future
            finally:
                stream.stop_push()
            feed = state.feed
            if feed is not None and feed.backlogged:
                await feed.flushed()
            return rest

        async def pump() -> None:
            first = True  # until the first output, it leaves as soon as it is encoded
            parts: list[bytes] = []
            try:
                async for batch in batches:
                    if not batch and nowait is not None and call.held:
                        opening(call.held)  # a read of held opening events only
                    if first:
                        for i, event in enumerate(batch):
                            if type(event) in _FIRST_OUTPUT:
                                first = False
                                parts = encoded(batch[: i + 1])
                                if parts and not await flush(parts):
                                    return
                                batch = batch[i + 1 :]
                                break
                    parts = encoded(batch)
                    while refused is None and not call.finished:
                        # (An empty batch, a reply's opening, starts nothing.)
                        # (Nothing leaves before the first output: not even the head.)
                        if parts and not await flush(parts):
                            return
                        parts = []
                        rest = await push()
                        if rest is None:
                            break
                        if held:
                            data = b"".join(held)
                            held.clear()
                            if not await self._write(send, state, data, held_last):
                                return
                        if pushed_last:
                            return
                        batch = rest
                        parts = encoded(rest)
                    if refused is not None or call.finished:
                        # The terminal event: the response ends with it, in one write;
                        # the rest of the upstream reply (its terminator) is read later.
                        break
                if refused is not None:
                    # A failure before any output: nothing was sent, not even the head.
                    if not state.gone:
                        state.started = True
                        await self._failed_reply(send, dialect, refused, refused_headers)
                    return
                if opening_parts:
                    # (An upstream call that ended with neither an output nor a failure.)
                    parts = [*opening_parts, *parts]
                    opening_parts.clear()
                tail = encoder_().close()
                if tail and not (failing and cut):
                    parts.append(tail)
                # A failure may end with an aborted transfer (_ends_aborted): nor is
                # the JSON array closed.
                if not await flush(parts, last=not (failing and cut)):
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not isinstance(exc, PolystreamError):
                    logger.error(
                        "upstream failure: %s", scrub(f"{type(exc).__name__}: {exc}", self.secrets)
                    )
                if not state.started and not state.gone:
                    state.started = True
                    if isinstance(exc, APIStatusError):
                        await self._upstream_error(send, dialect, exc)
                    elif isinstance(exc, PolystreamError):
                        await self._error(send, dialect, 502, str(exc), kind="server")
                    else:
                        await self._error(
                            send, dialect, 502, "the upstream call failed", kind="server"
                        )
                    return
                if state.started and not state.gone and not state.aborted and not failing:
                    # The upstream failed after the stream began: the client is told so
                    # in its dialect (the stream ends failed, or aborted; see
                    # _ends_aborted), never with a clean end.
                    if isinstance(exc, APIStatusError):
                        why = f"upstream: HTTP {exc.status_code}: {exc.args[0] if exc.args else ''}"
                    elif isinstance(exc, PolystreamError):
                        why = f"upstream: {exc}"
                    else:
                        why = "the upstream call failed"
                    parts = encoded(_failure_told(scrub(why, self.secrets)))
                    if not cut:
                        parts.append(encoder_().close())
                    with contextlib.suppress(Exception):
                        await flush([p for p in parts if p], last=not cut)
            finally:
                state.deadline.close()
                # Finalize the upstream call here, in this task, not in a GC finalizer.
                with contextlib.suppress(BaseException):
                    await stream.aclose()
                if state.journal_id is not None:
                    with contextlib.suppress(BaseException):
                        await self._journal_finish(state)
                if encoder is not None and not ahead:
                    # (With held events still ahead, nothing of the stream's was written.)
                    self._loss_headers(encoder)
            # A stream that began and did not end is left incomplete: the server closes
            # the connection and the client sees a broken transfer, never a clean end.

        pumping = asyncio.current_task()
        assert pumping is not None
        grace_timer: asyncio.TimerHandle | None = None

        async def watch() -> None:
            nonlocal grace_timer
            # Its first step runs once the pump waits for the upstream's answer: the
            # encoder and the response head are needed only then, and made while it is
            # asked they are off the path of the first delta (which, with the events
            # before the first output held back for a safe retry, also carries the
            # response's start). Should it fail, the pump makes it again and says why.
            with contextlib.suppress(Exception):
                response_start()
            keepalive = self.limits.keepalive_seconds
            comment = _keepalive(dialect)
            wait = keepalive
            while True:
                try:
                    async with asyncio.timeout(wait):
                        message = await receive()
                except TimeoutError:
                    quiet = loop.time() - state.deadline.last
                    if quiet < keepalive:
                        wait = keepalive - quiet  # the stream wrote since: not a silence
                        continue
                    wait = keepalive
                    if (
                        state.started
                        and sse
                        and comment
                        and not state.sending
                        and not state.aborted
                    ):
                        # A silence: a comment keeps proxies and clients from timing out.
                        await self._send(send, comment)
                    continue
                if message["type"] != "http.disconnect":
                    continue
                if state.ended:
                    # The response is complete (the server says so as a disconnect):
                    # what the pump has left, the end of the upstream reply and of the
                    # journal, finishes on its own, within its bounds.
                    return
                state.gone = True
                grace = self.limits.resume_grace_seconds
                if grace > 0 and state.journal_id is not None:
                    # Keep feeding the journal for a resuming client, for a bounded time.
                    grace_timer = loop.call_later(grace, pumping.cancel)
                else:
                    pumping.cancel()
                return

        watcher = asyncio.create_task(watch())
        try:
            await pump()
        except asyncio.CancelledError:
            if not state.gone:
                raise  # not the watcher's: the server's (its shutdown)
            # The client went away: the pump stopped, as the watcher asked (at once, or
            # after the grace period); what this request does ends here.
            pumping.uncancel()
        finally:
            watcher.cancel()
            if grace_timer is not None:
                grace_timer.cancel()
        # An aborted response returns without completing: the server closes the
        # connection, and the client sees a broken transfer, never a clean end.

    async def _out(
        self,
        send: Send,
        state: _StreamState,
        splitter: SSECursorSplitter | None,
        dialect: str,
        parts: list[bytes],
        last: bool = False,
    ) -> bool:
        """Journal encoded events and write them to the client (unless it has gone),
        ``last``: with the end of the response. False when the client does not keep up
        (the stream is then dropped)."""
        data = self._record(state, splitter, dialect, parts)
        feed = state.feed
        if feed is not None and feed.backlogged:
            await feed.flushed()
        return await self._write(send, state, data, last)

    def _record(
        self,
        state: _StreamState,
        splitter: SSECursorSplitter | None,
        dialect: str,
        parts: list[bytes],
    ) -> bytes:
        """Journal encoded events (the stream's journal made with its first entries);
        the bytes to write."""
        data, entries = self._split(splitter, parts)
        if entries:
            self._keep(state, splitter, dialect, entries)
        return data

    @staticmethod
    def _split(
        splitter: SSECursorSplitter | None, parts: list[bytes]
    ) -> tuple[bytes, list[tuple[str, bytes]]]:
        """Encoded events as the bytes to write and their journal entries (none without
        a splitter: a stream that is not SSE)."""
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if splitter is None or not data:
            return data, []
        entries = splitter.split(data)  # (an event cut short is kept for the next parts)
        if len(entries) == 1:
            return entries[0][1], entries
        return b"".join([e for _, e in entries]), entries

    def _keep(
        self,
        state: _StreamState,
        splitter: SSECursorSplitter | None,
        dialect: str,
        entries: list[tuple[str, bytes]],
    ) -> None:
        """Journal a stream's entries (its journal made with the first, under the id the
        gateway minted for it, bound to its tenant and dialect; its native id's alias
        made once the native id is known)."""
        assert splitter is not None
        journal_id = state.journal_id
        if journal_id is None:
            journal_id = state.journal_id = splitter.stream_id
            meta = {"dialect": dialect, "tenant": state.tenant}
            if self.journal.blocking:
                feed = state.feed = JournalFeed(self.journal, self._feed_failed)
                feed.create(journal_id, meta)
                self._feeds[journal_id] = feed
            else:
                self.journal.create(journal_id, meta, now=time.time())
        if state.alias is None and splitter.native_id is not None:
            self._alias(state, dialect, splitter.native_id)
        if state.feed is not None:
            state.feed.put(journal_id, entries)
        else:
            self.journal.append(journal_id, entries, now=time.time())

    def _alias(self, state: _StreamState, dialect: str, native_id: str) -> None:
        """Make the alias by which a stream's native id leads to it, for its tenant and
        dialect. An alias the journal holds already (a live stream of the same tenant
        had that native id) is left as it is: this stream stays resumable by its minted
        id, and a log line says so."""
        journal_id = state.journal_id
        assert journal_id is not None
        tenant = state.tenant or ""
        name = state.alias = alias_id(tenant, dialect, native_id)
        meta = {"alias": journal_id, "dialect": dialect, "tenant": state.tenant}

        def taken() -> None:
            state.alias = ""
            logger.warning(
                "stream %s: its native id %s could not be aliased (another stream of the "
                "same tenant and dialect holds it); it is resumable by its stream id only",
                journal_id,
                scrub(native_id[:200], self.secrets),
            )

        feed = state.feed
        if feed is not None:
            feed.alias(name, meta, taken)
            self._feeds.setdefault(name, feed)
            return
        try:
            self.journal.create(name, meta, now=time.time())
        except JournalConflict:
            taken()

    async def _write(self, send: Send, state: _StreamState, data: bytes, last: bool) -> bool:
        """Write a stream's bytes to the client (unless it has gone); False when it does
        not keep up (the stream is then dropped)."""
        if state.gone or (not data and not last):
            return True
        state.sending = True
        try:
            sent = await self._send(send, data, more=not last, deadline=state.deadline)
        finally:
            state.sending = False
        if not sent:
            state.aborted = True  # a reader too slow to keep up: drop the connection
        elif last:
            state.ended = True
        return sent

    async def _send(
        self,
        send: Send,
        data: bytes,
        more: bool = True,
        deadline: _WriteDeadline | None = None,
    ) -> bool:
        """Send body bytes (``more=False``: the last); a client that does not read
        within the limit is dropped. A stream's pump passes its ``deadline`` (one timer
        for all its writes); the few other writes (keep-alive comments, resumed entries)
        each take an ``asyncio.timeout``."""
        message = {"type": "http.response.body", "body": data, "more_body": more}
        if deadline is not None:
            return await deadline.send(send, message)
        try:
            async with asyncio.timeout(self.limits.slow_client_seconds):
                await send(message)
        except (TimeoutError, OSError):
            return False
        return True

    async def _journal_finish(self, state: _StreamState) -> None:
        """Mark the stream's journal complete, after everything handed to it is written
        (its feed then leaves the table a resume looks in)."""
        assert state.journal_id is not None
        feed = state.feed
        if feed is None:
            self.journal.finish(state.journal_id, now=time.time())
            return
        feed.finish(state.journal_id)
        try:
            await feed.flushed()
        finally:
            for name in feed.names:
                if self._feeds.get(name) is feed:
                    del self._feeds[name]

    def _feed_failed(self, exc: Exception) -> None:
        logger.error(
            "journal write failed (the stream cannot be resumed): %s",
            scrub(f"{type(exc).__name__}: {exc}", self.secrets),
        )

    # -- resume from the journal ----------------------------------------------------------

    async def _resume_native(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        stream_id: str,
        query: dict[str, str],
        tenant: str,
    ) -> None:
        if query.get("stream") not in ("true", "1"):
            await self._error(
                send,
                dialect,
                400,
                "the gateway serves resumes only with stream=true",
                param="stream",
            )
            return
        cursor = (
            query.get("starting_after")
            if dialect.endswith("_responses")
            else query.get("last_event_id")
        )
        await self._replay(send, receive, dialect, stream_id, cursor, tenant)

    async def _resume_counter(
        self, send: Send, receive: Receive, dialect: str, last_id: str, tenant: str
    ) -> None:
        # ``<stream>.<cursor>``: the stream's minted id (no dot in it), then the cursor
        # (the whole id, for the gateway's counter cursors; else the event's own).
        stream_id, _, rest = last_id.partition(".")
        cursor = last_id if counter_cursors(dialect) else rest
        await self._replay(send, receive, dialect, stream_id, cursor, tenant)

    async def _replay(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        stream_id: str,
        cursor: str | None,
        tenant: str,
    ) -> None:
        """Send a stream's entries after ``cursor``, then follow it while it runs; a
        client that goes away ends this at once (it frees its concurrency slot)."""
        task = asyncio.current_task()
        assert task is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            # Past the request's body only a disconnect can come (anything else, from a
            # server not keeping to ASGI, ends the watch: it never spins).
            if (await receive())["type"] == "http.disconnect":
                gone = True
                task.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self._replay_entries(send, dialect, stream_id, cursor, tenant)
        except asyncio.CancelledError:
            if not gone:
                raise  # not the watcher's: the server's (its shutdown)
            task.uncancel()
        finally:
            watcher.cancel()

    async def _replay_entries(
        self, send: Send, dialect: str, stream_id: str, cursor: str | None, tenant: str
    ) -> None:
        try:
            stream_id, entries, finished = await self._suffix(stream_id, cursor, tenant, dialect)
        except JournalMiss as exc:
            await self._error(send, dialect, 404, f"cannot resume: {exc}", kind="not_found")
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    *_SSE_HEADERS,
                    (b"x-polystream-resumed", b"suffix"),
                ],
            }
        )
        if not await self._send_entries(send, entries):
            return
        # Follow the stream live while it is still running (poll the shared journal for
        # the entries from a position on: each poll reads only those).
        position = 0
        try:
            if entries:
                position = entries[-1].position + 1
            elif not finished:
                position = await self._position_after(stream_id, cursor)
        except JournalMiss:
            finished = True
        idle = 0.0
        while not finished and idle < self.limits.idle_timeout:
            await asyncio.sleep(0.02)
            idle += 0.02
            try:
                more, finished = await self._journal("read_from", stream_id, position)
            except JournalMiss:
                break
            if more:
                idle = 0.0
                if not await self._send_entries(send, more):
                    return
                position = more[-1].position + 1
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _suffix(
        self, name: str, cursor: str | None, tenant: str, dialect: str
    ) -> tuple[str, list[Entry], bool]:
        """The journal id a resume names (a minted id, or a native id's alias), the
        entries after ``cursor`` and whether the stream finished. A shared (blocking)
        journal is given :data:`_JOURNAL_LAG_SECONDS` to show what another instance is
        writing.

        Raises:
            JournalMiss: Unknown or expired stream, one of another tenant or dialect
                (the same error), cursor not in it, or overflowed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (_JOURNAL_LAG_SECONDS if self.journal.blocking else 0.0)
        alias = alias_id(tenant, dialect, name)
        while True:
            for candidate in (name, alias):
                feed = self._feeds.get(candidate)
                if feed is not None:
                    await feed.flushed()  # what this process's client was sent is written
            try:
                journal_id = await self._resolve(name, alias, tenant, dialect)
                entries, finished = await self._journal("read_after", journal_id, cursor)
            except JournalMiss:
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(0.02)  # another instance's write on its way
                continue
            return journal_id, entries, finished

    async def _resolve(self, name: str, alias: str, tenant: str, dialect: str) -> str:
        """The journal id of the stream ``name`` names for ``tenant`` through
        ``dialect``: ``name`` itself when it is a minted id of that tenant and dialect,
        else the stream its alias leads to.

        Raises:
            JournalMiss: No such stream for this tenant and dialect (one message for
                all: an unknown id and another tenant's are not told apart).
        """
        if _MINTED.fullmatch(name):
            with contextlib.suppress(JournalMiss):
                meta = await self._journal("meta", name)
                if "alias" not in meta and _owned(meta, tenant, dialect):
                    return name
        with contextlib.suppress(JournalMiss):
            meta = await self._journal("meta", alias)
            target = meta.get("alias")
            if (
                isinstance(target, str)
                and _owned(meta, tenant, dialect)
                and _owned(await self._journal("meta", target), tenant, dialect)
            ):
                return target
        raise JournalMiss("no stream with this id (unknown or expired)")

    async def _position_after(self, stream_id: str, cursor: str | None) -> int:
        """The position right after ``cursor`` (0 for None), from one read of the stream
        (when nothing follows the cursor yet, its position is not otherwise known).

        Raises:
            JournalMiss: The stream or the cursor is gone.
        """
        if cursor is None:
            return 0
        everything: list[Entry]
        everything, _ = await self._journal("read_after", stream_id, None)
        for entry in everything:
            if entry.cursor == cursor:
                return entry.position + 1
        raise JournalMiss(f"cursor {cursor!r} is not in stream {stream_id!r}")

    async def _send_entries(self, send: Send, entries: list[Entry]) -> bool:
        """Send journalled entries, joined into writes of up to :data:`_REPLAY_BYTES`
        (one per entry would cost a write and a timer per event); False when the client
        was dropped."""
        batch: list[bytes] = []
        size = 0
        for entry in entries:
            batch.append(entry.data)
            size += len(entry.data)
            if size >= _REPLAY_BYTES:
                if not await self._send(send, b"".join(batch)):
                    return False
                batch = []
                size = 0
        return not batch or await self._send(send, b"".join(batch))


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


def _owned(meta: dict[str, Any], tenant: str, dialect: str) -> bool:
    """Whether a journal entry's metadata binds it to ``tenant`` and ``dialect`` (an
    entry that names no tenant, journalled before there were tenants, is the anonymous
    tenant's: only an open gateway serves it)."""
    return meta.get("tenant", ANONYMOUS_TENANT) == tenant and meta.get("dialect") == dialect


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
