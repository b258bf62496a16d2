"""The HTTP shells: carry out a :class:`~polystream.call.StreamCall`'s decisions over
httpx, synchronously or asynchronously. No protocol logic lives here."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import httpx
import msgspec

from polystream.accumulate import Result
from polystream.call import HttpRequest, StreamCall
from polystream.client._files import FileInput, read_files
from polystream.errors import LocalProtocolError
from polystream.events import Event
from polystream.request import (
    Message,
    ReasoningConfig,
    Request,
    TextPart,
    Tool,
    provider_of,
)
from polystream.retry import RetryPolicy

if TYPE_CHECKING:
    from polystream.client._h1 import DirectClient

__all__ = ["AsyncClient", "AsyncEventStream", "Client", "EventStream", "FileInput", "Shortcuts"]

_DROPS = (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError)
_CONNECT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_BATCH_BYTES = 32 * 1024
"""Most body bytes decoded into one batch of :meth:`AsyncEventStream.batches`."""
_FIRST_BATCH_BYTES = 1024
"""Most body bytes in the first batch of a reply; each later batch may be twice the one
before, up to :data:`_BATCH_BYTES`. So the first events of a reply are handed over
before the rest of a large first read is decoded (an upstream that sent its whole
reply at once), for a handful of extra batches per reply."""


class Shortcuts(TypedDict, total=False):
    """The keyword shortcuts of ``stream()`` for a one-message request.

    Keys:
        model: Required when no :class:`~polystream.request.Request` is given.
        prompt: The user message (a speech's input, an image's prompt); required when
            no Request is given, unless the call uploads ``files`` or streams a
            ``session``.
        system, tools, max_tokens, temperature, reasoning, background: As on Request.
        extra: Body fields the unified request does not name (``voice``,
            ``response_format``, ``partial_images``, ``language``...), added to
            :attr:`Request.extra`.
        files: Files to upload, by form field (``{"file": "audio.wav"}`` for a
            transcription, ``{"image": ...}`` for an image edit): the request is then
            sent as ``multipart/form-data``. Given with a Request too.
        session: An existing agent session to stream (its id); the request's input is
            sent to it once the stream is open. Given with a Request too.
        framing: For ``gemini_generate``: ``sse`` (default) or ``json_array``; for
            ``openai_speech``: ``sse`` (default) or ``raw`` (the audio file's bytes).
    """

    model: str
    prompt: str
    system: str | None
    tools: list[Tool] | None
    max_tokens: int | None
    temperature: float | None
    reasoning: ReasoningConfig | None
    background: bool
    extra: dict[str, Any]
    files: Mapping[str, FileInput]
    session: str
    framing: str


def _build_request(request: Request | None, shortcuts: Shortcuts) -> Request:
    if request is not None:
        return request
    model = shortcuts.get("model")
    prompt = shortcuts.get("prompt")
    wordless = "files" in shortcuts or "session" in shortcuts
    if model is None or (prompt is None and not wordless):
        raise LocalProtocolError("pass a Request, or model= and prompt=")
    messages = [] if prompt is None else [Message(role="user", content=[TextPart(text=prompt)])]
    return Request(
        model=model,
        messages=messages,
        system=shortcuts.get("system"),
        tools=shortcuts.get("tools") or [],
        max_tokens=shortcuts.get("max_tokens"),
        temperature=shortcuts.get("temperature"),
        reasoning=shortcuts.get("reasoning"),
        background=shortcuts.get("background", False),
    )


class _Base:
    def __init__(
        self,
        *,
        api_key: str | Mapping[str, str] | None = None,
        base_url: str | Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        connect_timeout: float = 10.0,
        idle_timeout: float = 120.0,
        resume: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self.retry = retry or RetryPolicy()
        self.idle_timeout = idle_timeout
        self.resume = resume
        self._headers = dict(headers or {})
        self._timeout = httpx.Timeout(
            connect=connect_timeout, read=idle_timeout, write=30.0, pool=connect_timeout
        )

    def _start(self, dialect: str, request: Request | None, shortcuts: Shortcuts) -> StreamCall:
        """The call for ``stream()`` (shared by the sync and async clients)."""
        built = _build_request(request, shortcuts)
        extra = dict(shortcuts.get("extra") or {})
        files: dict[str, bytes] = {}
        if "files" in shortcuts:
            metadata, files = read_files(shortcuts["files"])
            extra.update(metadata)
        if extra:
            built = msgspec.structs.replace(built, extra={**(built.extra or {}), **extra})
        return self._call(
            dialect,
            built,
            shortcuts.get("framing", "sse"),
            files=files,
            session=shortcuts.get("session"),
        )

    def _call(
        self,
        dialect: str,
        request: Request,
        framing: str,
        *,
        files: Mapping[str, bytes] | None = None,
        session: str | None = None,
    ) -> StreamCall:
        provider = provider_of(dialect)
        key = self._api_key
        if isinstance(key, Mapping):
            key = key.get(provider.name)
        key = key or os.environ.get(provider.env_key)
        if not key:
            raise LocalProtocolError(
                f"no API key for {provider.name}: pass api_key= or set {provider.env_key}"
            )
        base = self._base_url
        if isinstance(base, Mapping):
            base = base.get(provider.name)
        return StreamCall(
            dialect,
            request,
            api_key=key,
            base_url=base,
            policy=self.retry,
            resume=self.resume,
            framing=framing,
            extra_headers=self._headers,
            files=files,
            session=session,
        )


class EventStream:
    """A streaming call in progress (sync): iterate it for unified events.

    Attributes:
        call: The underlying :class:`~polystream.call.StreamCall` (headers, request id,
            rate limits, attempts, resumes).
    """

    def __init__(self, http: httpx.Client, call: StreamCall) -> None:
        self._http = http
        self.call = call
        self._iterator: Generator[Event, None, None] | None = None

    def __iter__(self) -> Iterator[Event]:
        if self._iterator is None:
            self._iterator = self._run()
        return self._iterator

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> Generator[Event, None, None]:
        call = self.call
        request = call.next_request()
        while request is not None:
            try:
                yield from self._attempt(request)
            except _CONNECT as exc:
                yield from call.on_connect_error(str(exc) or type(exc).__name__)
            if not call.pending:
                return
            time.sleep(call.pending_delay)
            request = call.next_request()

    def _attempt(self, request: HttpRequest) -> Iterator[Event]:
        call = self.call
        ended: list[Event] = []
        with self._http.stream(
            request.method, request.url, headers=request.headers, content=request.body
        ) as response:
            if response.status_code != 200:
                body = response.read()
                ended = call.on_error_status(
                    response.status_code, response.headers, body, now=time.time()
                )
            else:
                call.on_open(response.status_code, response.headers)
                send = call.take_send()
                if send is not None:
                    try:
                        answer = self._http.request(
                            send.method, send.url, headers=send.headers, content=send.body
                        )
                    except httpx.TransportError as exc:
                        call.on_send_error(str(exc) or type(exc).__name__)
                    call.on_send(answer.status_code, answer.headers, answer.content)
                try:
                    for chunk in response.iter_bytes():
                        yield from call.feed(chunk)
                        if _settled(call):
                            break
                    else:
                        ended = call.on_eof()
                except httpx.ReadTimeout:
                    ended = call.on_disconnect(f"no data for {call_idle(self)} s")
                except _DROPS as exc:
                    ended = call.on_disconnect(f"connection dropped: {exc or type(exc).__name__}")
        # Yielded only after the connection is closed: never from inside a handler that
        # may be running while the consumer closes this generator.
        yield from ended

    def close(self) -> None:
        """Stop now: close the upstream connection; the result says ``cancelled``."""
        if self._iterator is not None:
            self._iterator.close()
        self.call.cancelled()

    def until_done(self) -> EventStream:
        """Consume the rest of the stream."""
        for _ in self:
            pass
        return self

    def result(self) -> Result:
        """The unified result (consumes the rest of the stream first)."""
        if not self.call.finished:
            self.until_done()
        return self.call.result()

    def native(self) -> dict[str, Any]:
        """The provider's own final object (consumes the rest of the stream first)."""
        if not self.call.finished:
            self.until_done()
        return self.call.native()


def _settled(call: StreamCall) -> bool:
    """The call's attempt is over: a retry or resume is pending, or the stream ended."""
    return call.pending or call.finished


def call_idle(stream: EventStream | AsyncEventStream) -> float:
    timeout = stream._http.timeout.read
    return float(timeout) if timeout is not None else float("inf")


class Client(_Base):
    """A synchronous client for every SSE dialect.

    Args:
        api_key: A key, or keys by provider (``{"openai": ..., "gemini": ...}``);
            default: ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``XAI_API_KEY``,
            ``GEMINI_API_KEY``.
        base_url: A base URL, or base URLs by provider (default: the official ones).
        retry: Retry settings.
        connect_timeout: Seconds to connect.
        idle_timeout: Seconds without a byte before a stream counts as stalled (it
            is then resumed where possible, else ends ``truncated``).
        resume: Resume dropped streams where the provider allows it.
        transport: An ``httpx`` transport (tests pass ``httpx.MockTransport``).
    """

    def __init__(self, *, transport: httpx.BaseTransport | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._http = httpx.Client(transport=transport, timeout=self._timeout)

    def stream(
        self, dialect: str, request: Request | None = None, **shortcuts: Unpack[Shortcuts]
    ) -> EventStream:
        """Start a streaming call; iterate the result for unified events.

        Pass a full :class:`~polystream.request.Request`, or the :class:`Shortcuts`
        (``model=``, ``prompt=``, ...) for a one-message request.
        """
        return EventStream(self._http, self._start(dialect, request, shortcuts))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEventStream:
    """A streaming call in progress (async): ``async for`` it for unified events, or
    iterate :meth:`batches` for them a network read at a time."""

    def __init__(self, http: httpx.AsyncClient | DirectClient, call: StreamCall) -> None:
        self._http = http
        self.call = call
        self._iterator: AsyncGenerator[Any, None] | None = None
        self._batched = False
        # The reply that may push: set while the batches' generator waits between two
        # whole reads of it (see push).
        self._between: Any = None
        self._pushing: _Pushed | None = None
        self._openings = False

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iterator is None:
            self._batched = False
            self._iterator = self._events()
        elif self._batched:
            raise RuntimeError("this stream is iterated by batches()")
        return self._iterator

    def batches(self, *, openings: bool = False) -> AsyncIterator[list[Event]]:
        """The events a batch at a time: those of one network read (or of one decision:
        a retry warning, the end of the stream). Never an empty batch, unless
        ``openings``: then an empty batch also marks each reply's opening (its status
        is 200, none of its body is read yet) and each read whose events the call holds
        back whole (``call.held``: opening events, before the first output), where
        :meth:`push` can take the rest of the reply. A stream is iterated one way only
        (this, or ``async for``).

        Raises:
            RuntimeError: The stream is already iterated event by event.
        """
        if self._iterator is None:
            self._batched = True
            self._openings = openings
            self._iterator = self._batches()
        elif not self._batched:
            raise RuntimeError("this stream is iterated event by event")
        return self._iterator

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Each generator closes the one it iterates when it is closed itself (``async for``
    # does not): otherwise the inner one would be closed by the event loop's finalizer
    # hook, later, from a task of its own, which a wake-up of the loop starts.

    async def _events(self) -> AsyncGenerator[Event, None]:
        batches = self._batches()
        try:
            async for batch in batches:
                for event in batch:
                    yield event
        finally:
            await batches.aclose()

    async def _batches(self) -> AsyncGenerator[list[Event], None]:
        call = self.call
        request = call.next_request()
        while request is not None:
            attempt = self._attempt(request)
            try:
                async for batch in attempt:
                    yield batch
            except _CONNECT as exc:
                events = call.on_connect_error(str(exc) or type(exc).__name__)
                if events:
                    yield events
            finally:
                await attempt.aclose()
            if not call.pending:
                return
            await asyncio.sleep(call.pending_delay)
            request = call.next_request()

    async def _attempt(self, request: HttpRequest) -> AsyncGenerator[list[Event], None]:
        call = self.call
        ended: list[Event] = []
        async with self._http.stream(
            request.method, request.url, headers=request.headers, content=request.body
        ) as response:
            if response.status_code != 200:
                body = await response.aread()
                ended = call.on_error_status(
                    response.status_code, response.headers, body, now=time.time()
                )
            else:
                call.on_open(response.status_code, response.headers)
                send = call.take_send()
                if send is not None:
                    await self._send(send)
                if self._openings:
                    self._between = response
                    try:
                        yield []
                    finally:
                        self._between = None
                step = _FIRST_BATCH_BYTES  # the most bytes of the next batch
                try:
                    # (Events pushed at the opening may have ended the attempt already.)
                    if not _settled(call):
                        async for chunk in response.aiter_bytes():
                            # A read of at most ``step`` bytes is one batch (the slice is
                            # the chunk itself). A larger one (an upstream that sent much at
                            # once, or a reader that fell behind) is cut into batches of a
                            # bounded size, so that what is held per batch stays small and
                            # the first events of the reply leave before the rest is decoded.
                            start = 0
                            while True:
                                events = call.feed(chunk[start : start + step])
                                start += step
                                if step < _BATCH_BYTES:
                                    step *= 2
                                if events:
                                    if start >= len(chunk):
                                        self._between = response
                                    try:
                                        yield events
                                    finally:
                                        self._between = None
                                elif self._openings and call.held and start >= len(chunk):
                                    # A read the call held back whole (opening events):
                                    # pushing can begin here.
                                    self._between = response
                                    try:
                                        yield []
                                    finally:
                                        self._between = None
                                if start >= len(chunk):
                                    break
                            if _settled(call):
                                break
                        else:
                            ended = call.on_eof()
                except httpx.ReadTimeout:
                    ended = call.on_disconnect(f"no data for {call_idle(self)} s")
                except _DROPS as exc:
                    ended = call.on_disconnect(f"connection dropped: {exc or type(exc).__name__}")
        # Yielded only after the connection is closed (see the sync twin).
        if ended:
            yield ended

    async def _send(self, request: HttpRequest) -> None:
        """Send a subscribed session its input (see :meth:`StreamCall.take_send`)."""
        try:
            async with self._http.stream(
                request.method, request.url, headers=request.headers, content=request.body
            ) as answer:
                body = await answer.aread()
        except httpx.TransportError as exc:
            self.call.on_send_error(str(exc) or type(exc).__name__)
        self.call.on_send(answer.status_code, answer.headers, body)

    def push(
        self,
        handle: Callable[[list[Event]], bool],
        opening: Callable[[list[Event]], None] | None = None,
    ) -> asyncio.Future[list[Event]] | None:
        """Hand the events of each later network read to ``handle`` in the upstream
        connection's own callback, with no task woken and no iterator stepped, while
        :meth:`batches` waits between two batches.

        ``handle(events)`` is given the events of every read that leaves no retry or
        resume decision pending, the stream's last events among them (``call.finished``
        then tells), and takes them; it returns False to stop pushing after them.
        Pushing also stops when the call needs its task (the end of the stream, a retry
        or resume, the end of the body or of the connection, a failure, a silence of
        the read timeout), and at :meth:`stop_push`. The future then gives the events
        that ``handle`` was not given (maybe none), which come before the next batch,
        or the exception that ``handle`` or the call raised.

        ``opening(held)``, if given, is called in the same callback after a read that
        delivers nothing while the call holds opening events back (``call.held``, see
        :class:`~polystream.call.StreamCall`): a consumer may prepare what it will do
        with them (encode them, say) before the first output releases them, at the
        head of a later read's events. It must not change the list.

        None when the stream cannot push now: on a transport other than polystream's
        own, with a compressed reply, or while the stream is not between two batches
        of one reply. Call :meth:`stop_push` when the future is done or abandoned.
        """
        reply = self._between
        call = self.call
        if (
            reply is None
            or self._pushing is not None
            or _settled(call)
            or not hasattr(reply, "push")
        ):
            return None
        loop = asyncio.get_running_loop()
        pushed = _Pushed(call, handle, loop, call_idle(self), reply, opening)
        if not reply.push(pushed):
            pushed.close()
            return None
        self._pushing = pushed
        return pushed.future

    def stop_push(self) -> None:
        """End pushing (after :meth:`push`; harmless otherwise)."""
        pushed = self._pushing
        if pushed is not None:
            self._pushing = None
            pushed.reply.unpush()
            pushed.close()

    async def aclose(self) -> None:
        """Stop now: close the upstream connection; the result says ``cancelled``."""
        self.stop_push()
        if self._iterator is not None:
            await self._iterator.aclose()
        self.call.cancelled()

    async def until_done(self) -> AsyncEventStream:
        """Consume the rest of the stream."""
        async for _ in self:
            pass
        return self

    async def result(self) -> Result:
        """The unified result (consumes the rest of the stream first)."""
        if not self.call.finished:
            await self.until_done()
        return self.call.result()

    async def native(self) -> dict[str, Any]:
        """The provider's own final object (consumes the rest of the stream first)."""
        if not self.call.finished:
            await self.until_done()
        return self.call.native()


class _Pushed:
    """A push's sink (see :meth:`AsyncEventStream.push`): feeds each read's body to the
    call and hands the events on, in the connection's callback; keeps the read timeout
    with one timer, re-armed only when it fires."""

    __slots__ = (
        "_call",
        "_handle",
        "_idle",
        "_loop",
        "_opening",
        "_timer",
        "future",
        "last",
        "reply",
    )

    def __init__(
        self,
        call: StreamCall,
        handle: Callable[[list[Event]], bool],
        loop: asyncio.AbstractEventLoop,
        idle: float,
        reply: Any,
        opening: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self._call = call
        self._handle = handle
        self._opening = opening
        self._loop = loop
        self._idle = idle
        self.reply = reply
        self.future: asyncio.Future[list[Event]] = loop.create_future()
        self.last = loop.time()
        self._timer: asyncio.TimerHandle | None = None
        if idle != float("inf"):
            self._timer = loop.call_at(self.last + idle, self._check)

    def body(self, data: bytes) -> bool:
        future = self.future
        if future.done():
            return False
        self.last = self._loop.time()
        call = self._call
        try:
            events = call.feed(data)
            if call.pending:
                future.set_result(events)
                return False
            if events:
                if not self._handle(events):
                    future.set_result([])
                    return False
            elif self._opening is not None and call.held:
                self._opening(call.held)
            if call.finished:
                future.set_result([])
                return False
        except Exception as exc:
            future.set_exception(exc)
            return False
        return True

    def halt(self) -> None:
        if not self.future.done():
            self.future.set_result([])

    def _check(self) -> None:
        self._timer = None
        if self.future.done():
            return
        due = self.last + self._idle
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check)
            return
        # The read timeout, as the reader's own read would have raised it.
        self.reply.expire(httpx.ReadTimeout("timed out waiting for the upstream"))
        self.future.set_result([])

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.future.done():
            self.future.set_result([])


class AsyncClient(_Base):
    """The asynchronous twin of :class:`Client` (same options, same core)."""

    def __init__(
        self, *, transport: httpx.AsyncBaseTransport | None = None, **options: Any
    ) -> None:
        super().__init__(**options)
        self._http = httpx.AsyncClient(transport=transport, timeout=self._timeout)

    def stream(
        self, dialect: str, request: Request | None = None, **shortcuts: Unpack[Shortcuts]
    ) -> AsyncEventStream:
        """Start a streaming call; ``async for`` the result for unified events (same
        arguments as :meth:`Client.stream`)."""
        return AsyncEventStream(self._http, self._start(dialect, request, shortcuts))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
