"""The emulator's ASGI app: routes, body limits, and timed delivery of the core's plans.

Every decision (which reply, which status, which bytes, when) is made by
:class:`polystream.scenario.Emulator`; this module reads request bodies (bounded by
:data:`~polystream.scenario.MAX_BODY_SIZE`), calls it, then sends each planned chunk at
its time with ``more_body=True`` so that every event leaves the server as soon as it is
produced. A client that disconnects stops the delivery at once; a planned dropped
connection ends the response without its last chunk, so the client sees a broken
transfer rather than a clean end.

Base URLs (point the official SDK's ``base_url`` here, change nothing else):

* OpenAI ``http://HOST:PORT/openai/v1``
* xAI ``http://HOST:PORT/xai/v1`` (OpenAI SDK) and ``http://HOST:PORT/xai`` (Anthropic SDK)
* Anthropic ``http://HOST:PORT/anthropic``
* Gemini ``http://HOST:PORT/gemini`` (google-genai ``http_options={"base_url": ...}``)

The WebSocket families are served at the paths their SDK derives from the same base URL
(``/openai/v1/realtime``, ``/openai/v1/responses``: see :mod:`._ws_emulator`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from polystream.dialects import (
    DIALECTS,
    PROVIDERS,
    SSE_DIALECTS,
    RouteMatch,
    match_route,
    routes_of,
)
from polystream.realtime import SOCKET_SPECS
from polystream.scenario import (
    MAX_BODY_SIZE,
    Answer,
    DeliveryPlan,
    Emulator,
    error_answer,
    error_to_answer,
    json_answer,
    provider_of_path,
)
from polystream.server._inspect import mount_inspector
from polystream.server._ws_emulator import SOCKET_ENDPOINTS, TOKEN_MINTS, serve_socket
from polystream.wire.multipart import FormError, decode_form, is_form

__all__ = [
    "ENDPOINTS",
    "SOCKET_ENDPOINTS",
    "ServerStats",
    "create_app",
    "emulator_refusal",
    "quiet_dropped_connections",
]

logger = logging.getLogger("polystream.server")

ENDPOINTS: Final[tuple[tuple[str, str, str], ...]] = tuple(
    (route.method, PROVIDERS[spec.provider].prefix + route.path, name)
    for name, spec in DIALECTS.items()
    for route in spec.routes
)
"""Every emulated endpoint: method, path, dialect (each dialect's routes, under its
provider's prefix, as the registry lists them)."""


def _base_urls() -> dict[str, str]:
    """Where each provider's SDK points its ``base_url``: the provider's prefix plus the
    base path of the SDK that speaks the dialect's request family (the SDK of the first
    registered dialect of that family). A dialect whose base differs from its provider's
    (xAI's Messages endpoint, called with the Anthropic SDK) is listed by its own name."""
    served = {name: DIALECTS[name] for name in SSE_DIALECTS}  # (the chat dialects it answers)
    sdk_base: dict[str, str] = {}
    for spec in served.values():
        sdk_base.setdefault(spec.family, urlsplit(PROVIDERS[spec.provider].base_url).path)
    urls: dict[str, str] = {}
    for name, spec in served.items():
        provider = PROVIDERS[spec.provider]
        url = provider.prefix + sdk_base[spec.family].rstrip("/")
        own = DIALECTS[provider.default_dialect]
        if url == provider.prefix + sdk_base[own.family].rstrip("/"):
            urls.setdefault(provider.name, url)
        else:
            urls.setdefault(name, url)
    return urls


_ALL_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]
"""The methods the one route takes (a Starlette route needs its list)."""
_DROP_MESSAGE: Final = "ASGI callable returned without completing response."


class ServerStats:
    """Counters of what the server did (read by tests and the demo).

    Attributes:
        requests: Requests answered.
        streams: Streamed answers started.
        completed: Answers delivered to the end.
        cancelled: Answers stopped because the client disconnected.
        dropped: Answers ended by a planned dropped connection.
        chunks: Body chunks sent.
        sockets: WebSocket connections accepted.
        socket_messages: WebSocket messages sent.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.streams = 0
        self.completed = 0
        self.cancelled = 0
        self.dropped = 0
        self.chunks = 0
        self.sockets = 0
        self.socket_messages = 0


class _DropFilter(logging.Filter):
    """Silences uvicorn's error line for connections the emulator drops on purpose
    (a planned fault, not a failure); any other occurrence is still logged."""

    def __init__(self) -> None:
        super().__init__()
        self.pending = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.pending > 0 and record.getMessage() == _DROP_MESSAGE:
            self.pending -= 1
            return False
        return True


_drop_filter = _DropFilter()


def quiet_dropped_connections() -> None:
    """Install the filter that keeps planned connection drops out of uvicorn's error log."""
    uvicorn_error = logging.getLogger("uvicorn.error")
    if _drop_filter not in uvicorn_error.filters:
        uvicorn_error.addFilter(_drop_filter)


class _PlanResponse(Response):
    """Sends an :class:`~polystream.scenario.Answer`: each chunk at its time."""

    def __init__(self, answer: Answer, stats: ServerStats) -> None:
        self.answer = answer
        self.stats = stats
        self.status_code = answer.status
        self.background = None
        self.raw_headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        gone, watcher = _watch(receive)
        try:
            await _deliver(self.answer.plan, send, gone, self.stats)
        finally:
            watcher.cancel()


def _watch(receive: Receive) -> tuple[asyncio.Event, asyncio.Task[None]]:
    """An event set when the client disconnects, and the task that watches for it."""
    gone = asyncio.Event()

    async def watch() -> None:
        # The body was read already: the next message is the disconnect.
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    return gone, asyncio.create_task(watch())


async def _deliver(plan: DeliveryPlan, send: Send, gone: asyncio.Event, stats: ServerStats) -> None:
    """Send a plan's chunks, each at its time from now, then end the body (or drop the
    connection, as planned); stop at once when the client goes away."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        for chunk in plan.chunks:
            if not await _wait_until(start + chunk.at, loop, gone):
                stats.cancelled += 1
                return
            await send({"type": "http.response.body", "body": chunk.data, "more_body": True})
            stats.chunks += 1
        if plan.drop:
            stats.dropped += 1
            _drop_filter.pending += 1
            return  # the server closes the connection mid-body
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        stats.completed += 1
    except OSError:
        # ASGI 2.4 servers raise on a send after the client left: the same as a
        # disconnect seen by the watcher, not a failure.
        stats.cancelled += 1


class _Turns:
    """Wakes the session streams that wait for a turn when input arrives: each waits on
    the event current when it last looked; a notification sets it and starts a new one."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    def notify(self) -> None:
        self.arrived.set()
        self.arrived = asyncio.Event()


class _SubscriptionResponse(Response):
    """A session stream with no turn queued yet: the headers at once (the SDKs send the
    session's input only once the stream is open), then the session's next turn as soon
    as it is queued, delivered as planned."""

    def __init__(
        self, emulator: Emulator, dialect: str, session: str, turns: _Turns, stats: ServerStats
    ) -> None:
        self.emulator = emulator
        self.dialect = dialect
        self.session = session
        self.turns = turns
        self.stats = stats
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in emulator.stream_headers().items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone, watcher = _watch(receive)
        try:
            turn = await self._next(gone)
            if turn is None:
                self.stats.cancelled += 1
                return
            await _deliver(turn.plan, send, gone, self.stats)
        finally:
            watcher.cancel()

    async def _next(self, gone: asyncio.Event) -> Answer | None:
        while not gone.is_set():
            arrived = self.turns.arrived  # (taken before looking: no wake-up is missed)
            turn = self.emulator.subscribe(self.dialect, self.session)
            if turn is not None:
                return turn
            waiter = asyncio.ensure_future(arrived.wait())
            left = asyncio.ensure_future(gone.wait())
            try:
                await asyncio.wait({waiter, left}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                left.cancel()
        return None


async def _wait_until(
    deadline: float, loop: asyncio.AbstractEventLoop, gone: asyncio.Event
) -> bool:
    """Sleep until ``deadline``; False if the client went away first."""
    delay = deadline - loop.time()
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(gone.wait(), delay)
    return not gone.is_set()


async def _read_body(request: Request) -> bytes | None:
    """The request body, or None when it exceeds the limit (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_SIZE:
        return None
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY_SIZE:
            return None
        parts.append(part)
    return b"".join(parts)


def emulator_refusal(
    status: int, path: str, message: str
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body for polystream's HTTP server's own refusal of a request to
    ``path`` (its ``refusal`` hook when it serves the emulator): the provider's error
    shape, as the app answers; a 413 with the app's own message."""
    provider = provider_of_path(path)
    endpoints = routes_of(path) if _canonical(path) else []
    dialect = endpoints[0].dialect if endpoints else None
    if status == 413:
        message = f"Request too large: the body exceeds the limit of {MAX_BODY_SIZE} bytes."
    answer = error_answer(provider, status, message, dialect=dialect)
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers.items()
    ]
    return headers, answer.body


def create_app(emulator: Emulator | None = None) -> Starlette:
    """Build the ASGI app around an emulator (default: no scenarios, default replies).

    ``app.state.emulator`` is the emulator, ``app.state.stats`` its
    :class:`ServerStats`.
    """
    emu = emulator if emulator is not None else Emulator()
    stats = ServerStats()
    turns = _Turns()

    def respond(answer: Answer) -> Response:
        stats.requests += 1
        if answer.headers.get("content-type") == "text/event-stream":
            stats.streams += 1
        return _PlanResponse(answer, stats)

    async def generate(request: Request, found: RouteMatch) -> Response:
        model = found.params.get("model")
        stream = found.route.stream
        framing: str | None = None
        if stream and "json_array" in DIALECTS[found.dialect].framings:
            # google-genai calls {base}/v1beta/models/{model}:streamGenerateContent[?alt=sse]
            # (google/genai/models.py): the path decides streaming, alt the framing.
            framing = "sse" if request.query_params.get("alt") == "sse" else "json_array"
        body = await _read_body(request)
        if body is None:
            return respond(emu.too_large(provider_of_path(request.url.path), found.dialect))
        content_type = request.headers.get("content-type")
        form: dict[str, Any] | None = None
        if found.route.form_file is not None and is_form(content_type):
            assert content_type is not None
            try:
                form = decode_form(content_type, body, max_size=MAX_BODY_SIZE).fields
            except FormError as exc:
                return respond(emu.reject(found.dialect, 400, str(exc)))
        answer = emu.answer(
            found.dialect,
            body,
            content_type=content_type,
            model=model,
            stream=stream,
            framing=framing,
            created=int(time.time()),
            form=form,
            operation=found.route.operation,
        )
        if DIALECTS[found.dialect].family == "agent_session" and answer.status == 200:
            turns.notify()  # (a session created without streaming may have queued its turn)
        return respond(answer)

    async def send_input(request: Request, found: RouteMatch) -> Response:
        body = await _read_body(request)
        if body is None:
            return respond(emu.too_large(provider_of_path(request.url.path), found.dialect))
        answer = emu.send(
            found.dialect,
            found.params["id"],
            body,
            content_type=request.headers.get("content-type"),
            created=int(time.time()),
        )
        if answer.status == 200:
            turns.notify()
        return respond(answer)

    async def subscribe(request: Request, found: RouteMatch) -> Response:
        turn = emu.subscribe(found.dialect, found.params["id"])
        if turn is not None:
            return respond(turn)
        stats.requests += 1
        stats.streams += 1
        return _SubscriptionResponse(emu, found.dialect, found.params["id"], turns, stats)

    async def retrieve(request: Request, found: RouteMatch) -> Response:
        query = request.query_params
        stream = query.get("stream", "false").lower() == "true"
        resume = DIALECTS[found.dialect].resume
        cursor: int | str | None = None
        name = resume.cursor_param
        if name is not None and resume.cursor == "event_id":
            cursor = query.get(name) or None
        elif name is not None and query.get(name) is not None:
            raw = query[name]
            if not raw.lstrip("-").isdigit():
                return respond(_bad_param(request.url.path, name, raw))
            cursor = int(raw)
        return respond(
            emu.retrieve(found.dialect, found.params["id"], stream=stream, cursor=cursor)
        )

    async def index(request: Request) -> Response:
        listing = {
            "service": "polystream provider emulator",
            "base_urls": _base_urls(),
            "endpoints": [{"method": m, "path": p, "dialect": d} for m, p, d in ENDPOINTS],
            "websockets": [{"path": p, "family": f} for p, f in SOCKET_ENDPOINTS.items()],
        }
        return respond(json_answer(listing))

    async def mint(request: Request, family: str) -> Response:
        spec = SOCKET_SPECS[family]
        headers = {name.lower(): value for name, value in request.headers.items()}
        if not spec.auth.presented(headers, dict(request.query_params)):
            message = "Method doesn't allow unregistered callers. Please use an API key."
            return respond(error_to_answer(error_answer(spec.provider, 401, message)))
        body = await _read_body(request)
        if body is None:
            return respond(emu.too_large(spec.provider, None))
        return respond(emu.mint_token(family, body, time.time()))

    async def dispatch(request: Request) -> Response:
        # One route takes every path and method: the registry's routes decide, so a
        # known path with a wrong method gets 405 in the provider's shape (Starlette
        # would answer a plain-text 405).
        path = request.url.path
        method = request.method
        if path == "/":
            if method != "GET":
                return respond(emu.unknown_path(path, method, allowed=True))
            return await index(request)
        if method == "POST" and path in TOKEN_MINTS:
            return await mint(request, TOKEN_MINTS[path])
        found = match_route(method, path) if _canonical(path) else None
        if found is None and method == "GET" and path in SOCKET_ENDPOINTS:
            return respond(_upgrade_required(path))
        if found is None:
            allowed = _canonical(path) and bool(routes_of(path))
            return respond(emu.unknown_path(path, method, allowed=allowed))
        try:
            action = found.route.action
            if action == "resume":
                return await retrieve(request, found)
            if action == "send":
                return await send_input(request, found)
            if action == "subscribe":
                return await subscribe(request, found)
            return await generate(request, found)
        except Exception as exc:  # the server keeps serving; the client gets a 500
            logger.error("internal error on %s %s: %r", method, path, exc)
            return respond(_internal(path))

    async def socket(websocket: WebSocket) -> None:
        try:
            await serve_socket(websocket, emu, stats)
        except Exception as exc:  # the server keeps serving; the socket closes 1011
            logger.error("internal error on WebSocket %s: %r", websocket.url.path, exc)
            with contextlib.suppress(Exception):
                await websocket.close(1011, "internal error")

    routes = [
        Route("/{rest:path}", dispatch, methods=_ALL_METHODS),
        WebSocketRoute("/{rest:path}", socket),
    ]
    app = Starlette(routes=routes)
    mount_inspector(app)  # /inspect: the stream inspector (docs/inspect.md)
    app.state.emulator = emu
    app.state.stats = stats
    return app


def _canonical(path: str) -> bool:
    """The path has no empty segment (no trailing or doubled slash): only such a path
    is an endpoint's."""
    return path[:1] == "/" and "//" not in path and path[-1:] != "/"


def _upgrade_required(path: str) -> Answer:
    """A plain request to a WebSocket endpoint (one that asks for no upgrade, or a
    server without WebSocket support passing the upgrade request on as one)."""
    answer = error_to_answer(
        error_answer(
            provider_of_path(path),
            426,
            f"{path} is a WebSocket endpoint: connect with a WebSocket upgrade.",
            code="upgrade_required",
        )
    )
    answer.headers["upgrade"] = "websocket"
    return answer


def _internal(path: str) -> Answer:
    return error_to_answer(
        error_answer(provider_of_path(path), 500, "The emulator failed to answer this request.")
    )


def _bad_param(path: str, name: str, value: Any) -> Answer:
    return error_to_answer(
        error_answer(
            provider_of_path(path),
            400,
            f"Invalid value for '{name}': {value!r} is not an integer.",
            param=name,
        )
    )
